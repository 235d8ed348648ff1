"""Compare a declared TableSchema with the table the cluster already has.

``CREATE TABLE IF NOT EXISTS`` keeps an existing table as it is, even when it
no longer matches the declaration: the store adds the declared columns the
table lacks, and any other difference becomes a SchemaError instead of odd
write failures later.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.core.schema import Column, SchemaError, TableSchema
from stores.cassandra.error_map import reraise
from stores.cassandra.statements import COLUMN_ORDER_PREFIX
from stores.evolution import added_columns

__all__ = ["columns_to_add", "table_metadata", "refreshed_metadata", "schema_from_metadata"]

_TYPE_ALIASES = {"varchar": "text"}


def table_metadata(session: Any, keyspace: str, table: str) -> Any | None:
    """The driver's TableMetadata for ``keyspace.table``, or None when unknown to the driver."""
    cluster = getattr(session, "cluster", None)
    metadata = getattr(cluster, "metadata", None)
    keyspaces = getattr(metadata, "keyspaces", None) or {}
    ks = keyspaces.get(keyspace)
    return None if ks is None else ks.tables.get(table)


async def refreshed_metadata(session: Any, keyspace: str, table: str, timeout: float) -> Any | None:
    """The driver's TableMetadata of ``keyspace.table`` after it has read the table's schema again."""
    refresh = getattr(getattr(session, "cluster", None), "refresh_table_metadata", None)
    if refresh is not None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(None, refresh, keyspace, table), timeout)
        except Exception as exc:
            reraise(exc, f"refresh the metadata of {keyspace}.{table}")
    return table_metadata(session, keyspace, table)


def columns_to_add(schema: TableSchema, table: Any) -> tuple[Column, ...]:
    """The declared regular columns the existing ``table`` (driver TableMetadata) lacks.

    SchemaError when ``schema`` is not the table plus regular columns (another
    key or clustering order, another column type, a column left out): the rule
    of ``stores.evolution.added_columns``.
    """
    return added_columns(schema_from_metadata(table), schema)


def schema_from_metadata(table: Any) -> TableSchema:
    """The TableSchema of an existing table (as the driver describes it); SchemaError when unusable.

    Used when a store is opened over tables created earlier, without a new declaration.
    """
    key_names = {c.name for c in (*table.partition_key, *table.clustering_key)}

    def column(meta: Any) -> Column:
        return Column(meta.name, _TYPE_ALIASES.get(meta.cql_type, meta.cql_type))

    reversed_flags = {bool(c.is_reversed) for c in table.clustering_key}
    if len(reversed_flags) > 1:
        raise SchemaError("clustering_order", f"{table.name}: mixed clustering orders are not supported")
    ttl = (getattr(table, "options", None) or {}).get("default_time_to_live") or None
    try:
        return TableSchema(
            name=table.name,
            partition_key=tuple(column(c) for c in table.partition_key),
            clustering_key=tuple(column(c) for c in table.clustering_key),
            clustering_order="DESC" if reversed_flags == {True} else "ASC",
            columns=tuple(column(c) for c in _declared_order(table, key_names)),
            default_ttl=int(ttl) if ttl else None,
        )
    except SchemaError:
        raise
    except ValueError as exc:  # an identifier the store cannot use
        raise SchemaError("table", f"{table.name}: {exc}") from exc


def _declared_order(table: Any, key_names: set[str]) -> list[Any]:
    """Regular columns in the order the table comment records, else in the driver's order."""
    regular = {name: c for name, c in table.columns.items() if name not in key_names}
    comment = str((getattr(table, "options", None) or {}).get("comment") or "")
    if comment.startswith(COLUMN_ORDER_PREFIX):
        names = comment[len(COLUMN_ORDER_PREFIX) :].split()
        if sorted(names) == sorted(regular):
            return [regular[n] for n in names]
    return list(regular.values())
