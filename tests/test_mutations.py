"""Mutations reject bad input with typed errors that name the offending part."""

from __future__ import annotations

import decimal

import pytest

from framework.core.mutations import (
    MAX_TEXT_BYTES,
    MAX_VERSION,
    Delete,
    LogState,
    MutationError,
    Upsert,
    check_identifier,
    check_version,
)
from framework.core.schema import Column, SchemaError

K = {"id": "a"}


@pytest.mark.parametrize(
    "name",
    ["", "1abc", "a-b", "a b", "é", "x" * 49, None, 3, "drop;table", "users\n", "a\n", "x" * 48 + "\n"],
)
def test_invalid_table_names_are_refused(name: object) -> None:
    with pytest.raises(MutationError) as err:
        Upsert(name, K, {"c": 1}, 1)  # type: ignore[arg-type]
    assert err.value.field == "table"
    with pytest.raises(MutationError):
        check_identifier(name)


def test_identifiers_at_the_limits_are_accepted() -> None:
    assert check_identifier("a" + "_9" * 23 + "z") == "a" + "_9" * 23 + "z"  # 48 characters
    assert check_identifier("A") == "A"


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Upsert("t", {"bad-name": 1}, {"c": 1}, 1), "key.bad-name"),
        (lambda: Upsert("t", K, {"1c": 1}, 1), "cells.1c"),
        (lambda: Delete("t", K, 1, ("ok", "not ok")), "columns"),
        (lambda: Delete("t", K, 1, ()), "columns"),
        (lambda: Upsert("t", {}, {"c": 1}, 1), "key"),
        (lambda: Upsert("t", K, {}, 1), "cells"),
        (lambda: Upsert("t", K, {"id": "b"}, 1), "cells"),
        (lambda: Upsert("t", {"id": None}, {"c": 1}, 1), "key.id"),
        (lambda: Upsert("t", ["id"], {"c": 1}, 1), "key"),
        (lambda: Delete("t", {}, 1), "key"),
    ],
)
def test_malformed_keys_cells_and_columns_name_the_field(build, field: str) -> None:
    with pytest.raises(MutationError) as err:
        build()
    assert err.value.field == field


@pytest.mark.parametrize("version", [-1, MAX_VERSION + 1, 1.0, "1", True, None])
def test_versions_must_be_non_negative_int64(version: object) -> None:
    for build in (
        lambda: Upsert("t", K, {"c": 1}, version),
        lambda: Delete("t", K, version),
        lambda: LogState("t", K, "sent", 1, "ev", version),
    ):
        with pytest.raises(MutationError) as err:
            build()  # type: ignore[arg-type]
        assert err.value.field == "version"
    with pytest.raises(MutationError):
        check_version(version)


def test_version_bounds_are_accepted() -> None:
    assert Upsert("t", K, {"c": 1}, 0).version == 0
    assert Delete("t", K, MAX_VERSION).version == MAX_VERSION


@pytest.mark.parametrize(
    "value",
    [[1], {"a": 1}, {1}, object(), decimal.Decimal("1.5"), float("nan"), 2**63, -(2**63) - 1, "\ud800"],
)
def test_unstorable_values_are_refused(value: object) -> None:
    with pytest.raises(MutationError) as err:
        Upsert("t", K, {"c": value}, 1)  # type: ignore[dict-item]
    assert err.value.field == "cells.c"
    with pytest.raises(MutationError) as err:
        Upsert("t", {"id": value}, {"c": 1}, 1)  # type: ignore[dict-item]
    assert err.value.field == "key.id"


def test_oversized_values_are_refused_by_encoded_size() -> None:
    assert Upsert("t", K, {"c": "x" * MAX_TEXT_BYTES}, 1)
    assert Upsert("t", K, {"c": b"x" * MAX_TEXT_BYTES}, 1)
    for value in ("x" * (MAX_TEXT_BYTES + 1), "é" * (MAX_TEXT_BYTES // 2 + 1), b"x" * (MAX_TEXT_BYTES + 1)):
        with pytest.raises(MutationError) as err:
            Upsert("t", K, {"c": value}, 1)
        assert err.value.field == "cells.c"


@pytest.mark.parametrize("ttl", [0, -5, True, 1.5, "10", 630_720_001])
def test_ttl_must_be_positive_seconds_within_cassandras_limit(ttl: object) -> None:
    with pytest.raises(MutationError) as err:
        Upsert("t", K, {"c": 1}, 1, ttl=ttl)  # type: ignore[arg-type]
    assert err.value.field == "ttl"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"state": ""}, "state"),
        ({"state": 3}, "state"),
        ({"at": -1}, "at"),
        ({"at": "noon"}, "at"),
        ({"event_id": ""}, "event_id"),
        ({"event_id": 9}, "event_id"),
        ({"attrs": {"state": "x"}}, "attrs"),
        ({"key": {"at": 1}}, "attrs"),
        ({"attrs": {"bad name": 1}}, "attrs.bad name"),
    ],
)
def test_log_state_validation(kwargs: dict, field: str) -> None:
    args = {"table": "log", "key": K, "state": "sent", "at": 5, "event_id": "ev", "version": 1} | kwargs
    with pytest.raises(MutationError) as err:
        LogState(**args)
    assert err.value.field == field


def test_log_state_is_an_upsert_of_its_row() -> None:
    m = LogState("log", K, "opened", 5, "ev", 7, {"actor": "bob"})
    assert m.as_upsert() == Upsert(
        "log", {"id": "a", "at": 5, "event_id": "ev"}, {"state": "opened", "actor": "bob"}, 7
    )


def test_mutations_do_not_alias_their_inputs() -> None:
    key, cells = {"id": "a"}, {"c": 1}
    m = Upsert("t", key, cells, 1)
    key["id"], cells["c"] = "changed", 2
    assert dict(m.key) == {"id": "a"} and dict(m.cells) == {"c": 1}
    with pytest.raises(TypeError):
        m.cells["c"] = 3  # type: ignore[index]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("bigint", True),
        ("bigint", 1.5),
        ("text", 1),
        ("double", "1"),
        ("boolean", 1),
        ("blob", "x"),
        ("int", 2**31),
    ],
)
def test_schema_columns_refuse_ill_typed_values(column: str, value: object) -> None:
    with pytest.raises(SchemaError) as err:
        Column("c", column).check(value)  # type: ignore[arg-type]
    assert err.value.field == "c" and isinstance(err.value, MutationError)
