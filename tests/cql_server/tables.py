"""Tables and writes for the server's tests, made with the adapter's own CQL builders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.core.schema import TableSchema
from stores.cassandra import statements as cql
from tests.stores.harness import timeline_schema, unique
from tests.support.cql_server.fixtures import KEYSPACE

__all__ = ["timeline", "upsert", "qualified"]


def qualified(schema: TableSchema) -> str:
    return cql.qualified(KEYSPACE, schema.name)


def timeline(session: Any, order: str = "ASC") -> TableSchema:
    """A fresh clustered table: partition (org), clustering (day bigint, seq text), cells note, weight."""
    schema = timeline_schema(unique("tl"), order)
    session.execute(cql.create_table(KEYSPACE, schema).text)
    return schema


def upsert(
    session: Any,
    schema: TableSchema,
    key: Mapping[str, Any],
    cells: Mapping[str, Any],
    version: int,
    ttl: int = 0,
) -> None:
    """The adapter's ``UPDATE .. USING TIMESTAMP ? AND TTL ?`` for one row."""
    names = [c.name for c in schema.key_columns]
    statement = cql.upsert(KEYSPACE, schema.name, names, list(cells))
    prepared = session.prepare(statement.text)
    session.execute(prepared, (version, ttl, *cells.values(), *(key[n] for n in names)))
