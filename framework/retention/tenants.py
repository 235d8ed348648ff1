"""The tenant of a partition, also after retention expired the cell that named it.

A row's tenant may be a cell (``org_id``, ``tenant`` or ``tenant_id``)
written with some of its cells only (a hub row's main record) while other
pipelines add cells later (insights). When a run expires that cell and
keeps newer ones, the partition must keep its tenant: the run writes a
tenant record in ``converge_retention_tenants``, in the same apply as its
tombstone, and later runs read it for a partition none of whose live rows
names a tenant.

A record is keyed by the table and a SHA-256 of the partition key (no key
value is stored) and versioned by the tenant cell's write time, so the
latest tenant the store held wins. It costs one write per partition whose
tenant cell a run expires and one read per chunk for partitions without a
tenant; it is kept as long as the store (a framework table,
``framework.retention.bookkeeping``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from framework.core.mutations import CellValue, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from framework.notifications.entries import TENANT_COLUMNS, key_ident

__all__ = ["TENANT_TABLE", "CellTenant", "partition_tenant", "tenant_record", "recorded_tenants"]

TENANT_TABLE = TableSchema(
    name="converge_retention_tenants",
    partition_key=(Column("table_name", "text"), Column("partition", "text")),
    columns=(Column("tenant", "text"),),
)

#: A partition's own tenant: (tenant, write time of the cell that names it, or None from a key column).
CellTenant = tuple[str, int | None]


def partition_tenant(rows: Sequence[Row]) -> CellTenant | None:
    """The tenant a partition's live rows name: the first row's key column, else a cell (with its
    write time), by ``TENANT_COLUMNS`` order; None when none names one."""
    for row in rows:
        for column in TENANT_COLUMNS:
            value = row.key.get(column)
            if value is not None:
                return str(value), None
        for column in TENANT_COLUMNS:
            cell = row.cells.get(column)
            if cell is not None and cell.value is not None:
                return str(cell.value), cell.writetime
    return None


def _record_key(table: str, partition: Mapping[str, CellValue]) -> dict[str, Any]:
    digest = hashlib.sha256(key_ident(partition).encode("utf-8", "surrogatepass")).hexdigest()
    return {"table_name": table, "partition": digest}


def tenant_record(table: str, partition: Mapping[str, CellValue], tenant: str, version: int) -> Upsert:
    """The record that ``table``'s partition is ``tenant``'s, at the tenant cell's write time."""
    return Upsert(TENANT_TABLE.name, _record_key(table, partition), {"tenant": tenant}, version)


async def recorded_tenants(
    store: Any, table: str, partitions: Sequence[Mapping[str, CellValue]]
) -> list[str | None]:
    """The recorded tenant of each partition of ``table`` (None: never recorded), one read."""
    if not partitions:
        return []
    rows = await store.read_rows(TENANT_TABLE.name, [_record_key(table, p) for p in partitions])
    out: list[str | None] = []
    for row in rows:
        value = row.values().get("tenant") if row is not None else None
        out.append(str(value) if value is not None else None)
    return out
