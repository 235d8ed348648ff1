"""CQL text for the Cassandra store, built from validated identifiers only.

Every value travels as a bind marker (``?``); the only things formatted into
the text are identifiers that passed ``check_identifier`` (then double-quoted,
so case is kept and reserved words are harmless) and integers in DDL options,
which CQL cannot bind. Each builder returns the text and the names of its bind
markers in order, so callers and tests agree on what to bind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from framework.core.mutations import check_identifier
from framework.core.schema import Column, ColumnType, SchemaError, TableSchema

__all__ = [
    "Cql",
    "quote",
    "qualified",
    "create_keyspace",
    "create_table",
    "add_column",
    "set_column_order",
    "upsert",
    "delete",
    "select_row",
    "select_partition",
    "select_token_range",
    "TIMESTAMP",
    "TTL",
    "LIMIT",
    "TOKEN",
    "COLUMN_ORDER_PREFIX",
    "column_order_comment",
]

#: Names a server gives to the non-column bind markers (used only for documentation and tests).
TIMESTAMP = "[timestamp]"
TTL = "[ttl]"
LIMIT = "[limit]"
TOKEN = "partition key token"

_DC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


@dataclass(frozen=True)
class Cql:
    """A CQL statement: its text and the meaning of each bind marker, in order."""

    text: str
    markers: tuple[str, ...] = ()


def quote(name: str) -> str:
    """``name`` as a quoted CQL identifier; raises MutationError unless it is a safe identifier."""
    return '"' + check_identifier(name) + '"'


def qualified(keyspace: str, table: str) -> str:
    """The quoted ``keyspace.table``."""
    return f"{quote(keyspace)}.{quote(table)}"


def _names(names: Iterable[str]) -> str:
    return ", ".join(quote(n) for n in names)


def _where(columns: Sequence[str]) -> str:
    return " AND ".join(f"{quote(c)} = ?" for c in columns)


def create_keyspace(
    keyspace: str, replication_factor: int = 1, datacenters: Mapping[str, int] | None = None
) -> Cql:
    """``CREATE KEYSPACE IF NOT EXISTS``: SimpleStrategy, or NetworkTopologyStrategy per datacenter."""
    if datacenters:
        parts = ["'class': 'NetworkTopologyStrategy'"]
        for dc, rf in sorted(datacenters.items()):
            if not isinstance(dc, str) or not _DC_NAME.fullmatch(dc):
                raise SchemaError("datacenters", f"{dc!r} is not a datacenter name")
            parts.append(f"'{dc}': {_positive_int(rf, 'replication factor')}")
    else:
        rf = _positive_int(replication_factor, "replication_factor")
        parts = ["'class': 'SimpleStrategy'", f"'replication_factor': {rf}"]
    return Cql(f"CREATE KEYSPACE IF NOT EXISTS {quote(keyspace)} WITH replication = {{{', '.join(parts)}}}")


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SchemaError(what, f"must be a positive integer, got {value!r}")
    return value


def create_table(keyspace: str, schema: TableSchema) -> Cql:
    """``CREATE TABLE IF NOT EXISTS`` with the declared key, clustering order, TTL and column order."""
    cols = ", ".join(f"{quote(c.name)} {c.type}" for c in schema.all_columns)
    key = f"({_names(c.name for c in schema.partition_key)})"
    if schema.clustering_key:
        key += ", " + _names(c.name for c in schema.clustering_key)
    options = []
    if schema.clustering_key:
        order = ", ".join(f"{quote(c.name)} {schema.clustering_order}" for c in schema.clustering_key)
        options.append(f"CLUSTERING ORDER BY ({order})")
    if schema.default_ttl is not None:
        options.append(f"default_time_to_live = {_positive_int(schema.default_ttl, 'default_ttl')}")
    options.append(f"comment = '{column_order_comment(schema)}'")
    text = f"CREATE TABLE IF NOT EXISTS {qualified(keyspace, schema.name)} ({cols}, PRIMARY KEY ({key}))"
    return Cql(text + " WITH " + " AND ".join(options))


def add_column(keyspace: str, table: str, column: Column) -> Cql:
    """``ALTER TABLE .. ADD`` one regular column (its type is one of the checked column types)."""
    if column.type not in get_args(ColumnType):
        raise SchemaError(column.name, f"unsupported type {column.type!r}")
    return Cql(f"ALTER TABLE {qualified(keyspace, table)} ADD {quote(column.name)} {column.type}")


def set_column_order(keyspace: str, schema: TableSchema) -> Cql:
    """``ALTER TABLE .. WITH comment``: record the declared order of the regular columns again."""
    comment = column_order_comment(schema)
    return Cql(f"ALTER TABLE {qualified(keyspace, schema.name)} WITH comment = '{comment}'")


#: Start of the table comment that records the declared order of the regular columns
#: (Cassandra itself lists them alphabetically).
COLUMN_ORDER_PREFIX = "converge columns:"


def column_order_comment(schema: TableSchema) -> str:
    """The table comment naming the regular columns in declared order (identifiers only)."""
    return " ".join([COLUMN_ORDER_PREFIX, *(check_identifier(c.name) for c in schema.columns)])


def upsert(keyspace: str, table: str, key: Sequence[str], cells: Sequence[str]) -> Cql:
    """``UPDATE .. USING TIMESTAMP ? AND TTL ? SET c = ? .. WHERE k = ? ..`` (no row marker)."""
    sets = ", ".join(f"{quote(c)} = ?" for c in cells)
    text = (
        f"UPDATE {qualified(keyspace, table)} USING TIMESTAMP ? AND TTL ? "  # noqa: S608 - identifiers only
        f"SET {sets} WHERE {_where(key)}"
    )
    return Cql(text, (TIMESTAMP, TTL, *cells, *key))


def delete(keyspace: str, table: str, key: Sequence[str], columns: Sequence[str] = ()) -> Cql:
    """``DELETE [c, ..] FROM .. USING TIMESTAMP ? WHERE k = ? ..`` (row, partition or cells)."""
    target = f"{_names(columns)} " if columns else ""
    text = f"DELETE {target}FROM {qualified(keyspace, table)} USING TIMESTAMP ? WHERE {_where(key)}"
    return Cql(text, (TIMESTAMP, *key))


def _selection(schema: TableSchema, with_key: bool) -> str:
    parts = [quote(c.name) for c in schema.key_columns] if with_key else []
    for c in schema.columns:
        q = quote(c.name)
        parts += [q, f"WRITETIME({q})", f"TTL({q})"]
    return ", ".join(parts)


def select_row(keyspace: str, schema: TableSchema) -> Cql:
    """``SELECT c, WRITETIME(c), TTL(c), .. FROM .. WHERE <full primary key>``."""
    key = [c.name for c in schema.key_columns]
    text = (
        f"SELECT {_selection(schema, False)} FROM {qualified(keyspace, schema.name)} "  # noqa: S608
        f"WHERE {_where(key)}"
    )
    return Cql(text, tuple(key))


def _tuple_bound(columns: Sequence[str], op: str) -> str:
    return f"({_names(columns)}) {op} ({', '.join('?' for _ in columns)})"


def select_partition(
    keyspace: str,
    schema: TableSchema,
    *,
    start_len: int = 0,
    end_len: int = 0,
    reverse: bool = False,
    limit: bool = False,
) -> Cql:
    """Rows of one partition with inclusive multi-column bounds on clustering prefixes."""
    ck = [c.name for c in schema.clustering_key]
    for n in (start_len, end_len):
        if not 0 <= n <= len(ck):
            raise SchemaError("clustering", f"{schema.name}: bound on {n} of {len(ck)} clustering columns")
    pk = [c.name for c in schema.partition_key]
    where = [_where(pk)]
    markers: list[str] = list(pk)
    if start_len:
        where.append(_tuple_bound(ck[:start_len], ">="))
        markers += ck[:start_len]
    if end_len:
        where.append(_tuple_bound(ck[:end_len], "<="))
        markers += ck[:end_len]
    text = (
        f"SELECT {_selection(schema, True)} FROM {qualified(keyspace, schema.name)} "  # noqa: S608
        f"WHERE {' AND '.join(where)}"
    )
    if reverse and ck:
        flipped = "DESC" if schema.clustering_order == "ASC" else "ASC"
        text += " ORDER BY " + ", ".join(f"{quote(c)} {flipped}" for c in ck)
    if limit:
        text += " LIMIT ?"
        markers.append(LIMIT)
    return Cql(text, tuple(markers))


def select_token_range(keyspace: str, schema: TableSchema) -> Cql:
    """Rows whose partition token lies in the inclusive range ``[?, ?]``."""
    token = f"token({_names(c.name for c in schema.partition_key)})"
    text = (
        f"SELECT {_selection(schema, True)} FROM {qualified(keyspace, schema.name)} "  # noqa: S608
        f"WHERE {token} >= ? AND {token} <= ?"
    )
    return Cql(text, (TOKEN, TOKEN))
