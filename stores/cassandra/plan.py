"""From mutations and reads to (statement shape, bind values), and from result rows back to Rows.

Everything here is pure: it validates against the declared TableSchema before
anything is sent, names the prepared-statement shape (the cache key) and lists
the values to bind, in the order of the statement's bind markers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from framework.core.cells import Cell
from framework.core.mutations import CellValue, Delete, LogState, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import SchemaError, TableSchema
from stores.cassandra import statements as cql

__all__ = ["Planned", "plan_mutation", "plan_read_row", "plan_partition", "plan_scan", "decode_row"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Planned:
    """A statement to run: its cache key, how to build its CQL, and the values to bind.

    Reads key the cache by the whole schema: their selection lists every column.
    """

    shape: tuple[Any, ...]
    build: Callable[[], cql.Cql]
    values: tuple[CellValue, ...]
    what: str


def _names(columns: Sequence[Any]) -> list[str]:
    return [c.name for c in columns]


def plan_mutation(keyspace: str, schema: TableSchema, mutation: Mutation) -> Planned:
    """Validate ``mutation`` against ``schema`` and plan its write; raises SchemaError."""
    if isinstance(mutation, LogState):
        mutation = mutation.as_upsert()
    if mutation.table != schema.name:
        raise SchemaError("table", f"mutation for {mutation.table!r} planned against {schema.name!r}")
    if isinstance(mutation, Upsert):
        return _plan_upsert(keyspace, schema, mutation)
    if isinstance(mutation, Delete):
        return _plan_delete(keyspace, schema, mutation)
    raise SchemaError("mutation", f"unsupported mutation {type(mutation).__name__}")


def _plan_upsert(keyspace: str, schema: TableSchema, m: Upsert) -> Planned:
    schema.check_key(m.key)
    schema.check_cells(m.cells)
    key = _names(schema.key_columns)
    cells = [c.name for c in schema.columns if c.name in m.cells]
    ttl = m.ttl if m.ttl is not None else (schema.default_ttl or 0)
    values = (m.version, ttl, *(m.cells[c] for c in cells), *(m.key[k] for k in key))
    return Planned(
        ("upsert", schema.name, tuple(cells)),
        lambda: cql.upsert(keyspace, schema.name, key, cells),
        values,
        f"upsert {schema.name}",
    )


def _plan_delete(keyspace: str, schema: TableSchema, m: Delete) -> Planned:
    partition_only = bool(schema.clustering_key) and set(m.key) == set(_names(schema.partition_key))
    schema.check_key(m.key, partition_only=partition_only)
    key = _names(schema.partition_key if partition_only else schema.key_columns)
    columns: list[str] = []
    if m.columns is not None:
        if partition_only:
            raise SchemaError("columns", f"{schema.name}: cells can only be deleted in one row (full key)")
        regular = {c.name for c in schema.columns}
        for name in m.columns:
            if name not in regular:
                raise SchemaError(name, f"{schema.name}: {name!r} is not a regular column")
        columns = [c.name for c in schema.columns if c.name in m.columns]
    kind = "delete_cells" if columns else ("delete_partition" if partition_only else "delete_row")
    values = (m.version, *(m.key[k] for k in key))
    return Planned(
        (kind, schema.name, tuple(columns)),
        lambda: cql.delete(keyspace, schema.name, key, columns),
        values,
        f"{kind.replace('_', ' ')} {schema.name}",
    )


def plan_read_row(keyspace: str, schema: TableSchema, key: Mapping[str, CellValue]) -> Planned:
    """Validate the full primary ``key`` and plan the single-row read."""
    schema.check_key(key)
    return Planned(
        ("read_row", schema),
        lambda: cql.select_row(keyspace, schema),
        tuple(key[c.name] for c in schema.key_columns),
        f"read row {schema.name}",
    )


def _bound(schema: TableSchema, bound: Sequence[CellValue] | None, what: str) -> tuple[CellValue, ...]:
    if bound is None:
        return ()
    if isinstance(bound, (str, bytes)) or not isinstance(bound, Sequence):
        raise SchemaError(what, "must be a sequence of clustering values")
    values = tuple(bound)
    if len(values) > len(schema.clustering_key):
        n = len(schema.clustering_key)
        raise SchemaError(what, f"{schema.name}: {len(values)} values for {n} clustering columns")
    for col, value in zip(schema.clustering_key, values, strict=False):
        if value is None:
            raise SchemaError(what, f"{col.name}: a bound value cannot be null")
        col.check(value)
    return values


def plan_partition(
    keyspace: str,
    schema: TableSchema,
    partition_key: Mapping[str, CellValue],
    start: Sequence[CellValue] | None,
    end: Sequence[CellValue] | None,
    limit: int | None,
    reverse: bool,
) -> Planned:
    """Validate and plan a partition slice; ``limit`` must be None or in [1, 2**31-1]."""
    schema.check_key(partition_key, partition_only=True)
    lo, hi = _bound(schema, start, "start"), _bound(schema, end, "end")
    bad_limit = isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= _INT32_MAX
    if limit is not None and bad_limit:
        raise ValueError(f"limit must be None or a positive 32-bit integer, got {limit!r}")
    reverse = bool(reverse) and bool(schema.clustering_key)
    has_limit = limit is not None
    values = (*(partition_key[c.name] for c in schema.partition_key), *lo, *hi)
    if has_limit:
        values += (limit,)
    return Planned(
        ("read_partition", schema, len(lo), len(hi), reverse, has_limit),
        lambda: cql.select_partition(
            keyspace, schema, start_len=len(lo), end_len=len(hi), reverse=reverse, limit=has_limit
        ),
        values,
        f"read partition {schema.name}",
    )


def plan_scan(keyspace: str, schema: TableSchema, first: int, last: int) -> Planned:
    """Plan the read of every row whose partition token is in ``[first, last]``."""
    return Planned(
        ("scan", schema),
        lambda: cql.select_token_range(keyspace, schema),
        (first, last),
        f"scan {schema.name}",
    )


def decode_row(
    schema: TableSchema, raw: Any, now_s: float, key: Mapping[str, CellValue] | None = None
) -> Row | None:
    """A result row (tuple or mapping) as a Row; None when it has no live cell.

    Without ``key`` the row starts with the key columns. Then each regular column
    comes as (value, WRITETIME, TTL); a null value is a missing or deleted cell.
    """
    values = tuple(raw.values()) if isinstance(raw, Mapping) else tuple(raw)
    width = (0 if key is not None else len(schema.key_columns)) + 3 * len(schema.columns)
    if len(values) != width:
        raise ValueError(f"{schema.name}: result row has {len(values)} columns, expected {width}")
    if key is None:
        key = dict(zip(_names(schema.key_columns), values, strict=False))
        values = values[len(schema.key_columns) :]
    else:
        key = {c.name: key[c.name] for c in schema.key_columns}
    cells: dict[str, Cell] = {}
    for i, col in enumerate(schema.columns):
        value, writetime, ttl = values[3 * i : 3 * i + 3]
        if value is None or writetime is None:
            continue
        expires = None if ttl is None else int(now_s) + int(ttl)
        cells[col.name] = Cell(value, int(writetime), expires)
    if not cells:
        return None
    return Row(MappingProxyType(dict(key)), MappingProxyType(cells))
