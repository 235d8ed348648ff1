"""Policy resolution: the store's overrides, the app's per-tenant, per-table and default days."""

from __future__ import annotations

import pytest

from framework.core.cells import Cell
from framework.core.rows import Row
from framework.retention import DAY_US, POLICY_TABLE, RetentionPolicy, overrides_from_rows, policy_row
from framework.retention.policy import tenant_of_row

POLICY = RetentionPolicy(
    default_days=365,
    per_table={"log": 30, "audit": None},
    per_tenant={"acme": {"*": 90, "log": 7}, "initech": {"note": None}},
)


def _row(tenant: str, table: str, days: int) -> Row:
    return Row({"tenant": tenant, "table_name": table}, {"days": Cell(days, 1)})


@pytest.mark.parametrize(
    ("tenant", "table", "days"),
    [
        ("acme", "log", 7),  # the tenant's own entry for the table
        ("acme", "note", 90),  # the tenant's "*"
        ("acme", "audit", 90),  # a tenant's "*" beats the app's per-table
        ("globex", "log", 30),  # per table
        ("globex", "audit", None),  # per table: forever
        ("globex", "note", 365),  # default
        ("initech", "note", None),  # the tenant keeps it forever
        ("initech", "log", 30),
    ],
)
def test_app_levels(tenant: str, table: str, days: int | None) -> None:
    assert POLICY.days(tenant, table) == days


def test_store_overrides_come_first_at_each_level() -> None:
    stored = overrides_from_rows(
        [_row("acme", "note", 3), _row("globex", "*", 10), _row("initech", "log", 0)]
    )
    assert stored == {("acme", "note"): 3, ("globex", "*"): 10, ("initech", "log"): None}
    assert POLICY.days("acme", "note", stored) == 3  # store (tenant, table) over app (tenant, *)
    assert POLICY.days("acme", "log", stored) == 7  # app (tenant, table) over nothing more specific
    assert POLICY.days("globex", "log", stored) == 10  # store (tenant, *) over the app's per table
    assert POLICY.days("initech", "log", stored) is None  # 0 in the store: forever


def test_cutoff_in_versions() -> None:
    now = 1_000 * DAY_US
    assert POLICY.cutoff("acme", "log", now) == now - 7 * DAY_US
    assert POLICY.cutoff("initech", "note", now) is None
    assert RetentionPolicy(default_days=5000).cutoff("x", "t", now) == 0


def test_policy_rows_and_may_expire() -> None:
    row = policy_row("acme", "*", None, 5)
    assert row.table == POLICY_TABLE.name and row.cells == {"days": 0} and row.version == 5
    with pytest.raises(ValueError, match="positive"):
        policy_row("acme", "note", 0, 5)
    keep = RetentionPolicy(per_tenant={"acme": {"log": 3}})
    assert keep.may_expire("log") and not keep.may_expire("note")
    assert keep.may_expire("note", {("x", "*"): 4}) and not keep.may_expire("note", {("x", "*"): None})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"default_days": 0},
        {"per_table": {"log": -1}},
        {"per_table": {"bad name": 3}},
        {"per_tenant": {"": {"log": 3}}},
        {"per_tenant": {"acme": {"log": True}}},
        {"tenant_from": {"log": "hub", "hub": "other"}},
    ],
)
def test_malformed_policies_are_rejected(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError):
        RetentionPolicy(**kwargs)


def test_tenant_of_a_row_key_column_then_cell() -> None:
    assert tenant_of_row({"org_id": "a", "id": "1"}, {"tenant": "b"}) == "a"
    assert tenant_of_row({"id": "1"}, {"tenant": "b"}) == "b"
    assert tenant_of_row({"id": "1"}, {"x": 1}) is None


def test_a_policy_naming_an_unknown_table_is_refused() -> None:
    from framework.retention import RetentionError, domains
    from tests.retention.toy import toy_app

    with pytest.raises(RetentionError, match="nope"):
        domains(toy_app(), RetentionPolicy(per_table={"nope": 3}))
    with pytest.raises(RetentionError, match="items_version"):
        domains(toy_app(), RetentionPolicy(per_tenant={"a": {"items_version": 3}}))
    assert domains(toy_app(), RetentionPolicy(per_tenant={"a": {"*": 3}})) == {
        "item": ["item"],
        "item_log": ["item_log"],
    }
