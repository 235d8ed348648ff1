"""``RetentionPolicy``: how many days each tenant keeps each table, and which tenant a row is of;
``RetainingApp``: an app as the retention job reads it.

Days resolve per (tenant, table), most specific first; the first level that
names a value decides:

1. the store's policy table ``converge_retention_policy`` row (tenant, table);
2. the app's ``per_tenant[tenant][table]``;
3. the store's row (tenant, ``*``);
4. the app's ``per_tenant[tenant]["*"]``;
5. the app's ``per_table[table]``;
6. the app's ``default_days``.

``None`` in the app, or ``0`` in the policy table, means "keep forever".

A row's tenant: the notifications rule (a key column ``org_id``, ``tenant``
or ``tenant_id``), then a cell of the row with one of those names; a table
listed in ``tenant_from`` takes the tenant of the row with the same
partition key in the named table (a state log takes its hub row's). A
partition none of whose live rows names a tenant any more (a run expired
the cell) takes the tenant recorded when it did (``framework.retention.tenants``).
Without any, the row is the default tenant ``-``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from framework.core.mutations import CellValue, Upsert, check_identifier
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from framework.notifications.config import NotifyingApp
from framework.notifications.entries import TENANT_COLUMNS
from framework.notifications.schema import DEFAULT_TENANT

__all__ = [
    "RetentionPolicy",
    "RetainingApp",
    "PolicyOverrides",
    "POLICY_TABLE",
    "ALL_TABLES",
    "DAY_US",
    "policy_row",
    "overrides_from_rows",
    "tenant_of_row",
]

#: Microseconds in a day (versions are microseconds).
DAY_US = 86_400_000_000
#: The table name that stands for every table in ``per_tenant`` and the policy table.
ALL_TABLES = "*"

#: Per-tenant overrides kept in the store: (tenant, table or ``*``) -> days (0: keep forever).
POLICY_TABLE = TableSchema(
    name="converge_retention_policy",
    partition_key=(Column("tenant", "text"),),
    clustering_key=(Column("table_name", "text"),),
    columns=(Column("days", "bigint"),),
)

#: (tenant, table) -> days (None: keep forever), as read from ``POLICY_TABLE``.
PolicyOverrides = Mapping[tuple[str, str], "int | None"]


def _days(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what}: days must be a positive int or None (keep forever), got {value!r}")
    return value


def _table_name(name: str, what: str) -> str:
    if name != ALL_TABLES:
        check_identifier(name, what)
    return name


@dataclass(frozen=True)
class RetentionPolicy:
    """Retention of an app's tables (``App(..., retention=RetentionPolicy(...))``).

    - ``default_days``: days every table of every tenant keeps (None: forever);
    - ``per_table``: days per table, for every tenant;
    - ``per_tenant``: ``{tenant: {table or "*": days}}``;
    - ``tenant_from``: ``{table: owner table}``: a row of ``table`` is of the tenant of the
      owner's row with the same partition key (the two share their partition key);
    - ``seal``: write the cutoff tombstone into every live partition a run examines, also
      those with nothing to delete yet, so a late event older than the cutoff never shows
      (off: only partitions that lose data get one);
    - ``use_policy_table``: read overrides from ``converge_retention_policy`` in the store.
    """

    default_days: int | None = None
    per_table: Mapping[str, int | None] = field(default_factory=dict)
    per_tenant: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    tenant_from: Mapping[str, str] = field(default_factory=dict)
    seal: bool = True
    use_policy_table: bool = True

    def __post_init__(self) -> None:
        _days(self.default_days, "default_days")
        for table, days in self.per_table.items():
            _days(days, f"per_table[{_table_name(table, 'per_table')}]")
        for tenant, tables in self.per_tenant.items():
            if not isinstance(tenant, str) or not tenant:
                raise ValueError(f"per_tenant: a tenant is a non-empty string, got {tenant!r}")
            for table, days in tables.items():
                _days(days, f"per_tenant[{tenant}][{_table_name(table, 'per_tenant')}]")
        for table, owner in self.tenant_from.items():
            check_identifier(table, "tenant_from")
            check_identifier(owner, "tenant_from")
            if owner in self.tenant_from:
                raise ValueError(f"tenant_from: {owner} takes its tenant from another table itself")
        object.__setattr__(self, "per_table", MappingProxyType(dict(self.per_table)))
        frozen = {t: MappingProxyType(dict(v)) for t, v in self.per_tenant.items()}
        object.__setattr__(self, "per_tenant", MappingProxyType(frozen))
        object.__setattr__(self, "tenant_from", MappingProxyType(dict(self.tenant_from)))

    def days(self, tenant: str, table: str, overrides: PolicyOverrides | None = None) -> int | None:
        """Days ``tenant`` keeps ``table`` (None: forever), by the order of the module docstring."""
        stored = overrides or {}
        mine = self.per_tenant.get(tenant, {})
        sources: tuple[tuple[Mapping[Any, int | None], object], ...] = (
            (stored, (tenant, table)), (mine, table), (stored, (tenant, ALL_TABLES)), (mine, ALL_TABLES),
        )  # fmt: skip
        for source, where in sources:
            if where in source:
                return source[where]
        if table in self.per_table:
            return self.per_table[table]
        return self.default_days

    def cutoff(
        self, tenant: str, table: str, now_us: int, overrides: PolicyOverrides | None = None
    ) -> int | None:
        """The version below which ``tenant``'s data of ``table`` is expired at ``now_us``
        (None: kept forever). Never below 0."""
        days = self.days(tenant, table, overrides)
        return None if days is None else max(0, now_us - days * DAY_US)

    def may_expire(self, table: str, overrides: PolicyOverrides | None = None) -> bool:
        """Whether any tenant's policy can expire rows of ``table`` (else a run skips it)."""
        if self.default_days is not None or self.per_table.get(table) is not None:
            return True
        if any(t.get(table, t.get(ALL_TABLES)) is not None for t in self.per_tenant.values()):
            return True
        return any(
            d is not None and name in (table, ALL_TABLES) for (_, name), d in (overrides or {}).items()
        )


def policy_row(tenant: str, table: str, days: int | None, version: int) -> Upsert:
    """The policy-table write that sets ``tenant``'s days of ``table`` (``*``: every table;
    None: keep forever) at ``version`` (the latest write wins)."""
    if not tenant:
        raise ValueError("policy_row: tenant must be a non-empty string")
    _days(days, "days")
    key = {"tenant": tenant, "table_name": _table_name(table, "table")}
    return Upsert(POLICY_TABLE.name, key, {"days": 0 if days is None else days}, version)


def overrides_from_rows(rows: Iterable[Row]) -> dict[tuple[str, str], int | None]:
    """The overrides that rows of ``POLICY_TABLE`` hold (days 0: keep forever)."""
    out: dict[tuple[str, str], int | None] = {}
    for row in rows:
        days = row.values().get("days")
        if isinstance(days, int) and not isinstance(days, bool) and days >= 0:
            out[(str(row.key["tenant"]), str(row.key["table_name"]))] = days or None
    return out


def tenant_of_row(key: Mapping[str, CellValue], cells: Mapping[str, CellValue]) -> str | None:
    """A row's own tenant: a key column, then a cell, named ``org_id``/``tenant``/``tenant_id``."""
    for source in (key, cells):
        for column in TENANT_COLUMNS:
            value = source.get(column)
            if value is not None:
                return str(value)
    return None


def default_tenant(tenant: str | None) -> str:
    """``tenant``, or the default tenant ``-`` when there is none."""
    return DEFAULT_TENANT if tenant is None else tenant


class RetainingApp(NotifyingApp, Protocol):
    """A ``NotifyingApp`` with its retention policy (None: none declared)."""

    @property
    def retention(self) -> RetentionPolicy | None: ...
