"""Every statement the adapter builds parses and analyses to exactly the markers it binds (no socket)."""

from __future__ import annotations

import pytest

from framework.core.schema import TableSchema
from stores.cassandra import statements as cql
from tests.stores.harness import hub_schema, log_schema, timeline_schema
from tests.support.cql_server.analyze import analyze
from tests.support.cql_server.ast import CreateKeyspace
from tests.support.cql_server.catalog import Catalog
from tests.support.cql_server.errors import CqlSyntaxError
from tests.support.cql_server.parser import parse

KS = "ks"
SCHEMAS = [hub_schema("hub", 60), timeline_schema("tl", "DESC"), log_schema("log")]


def _catalog() -> Catalog:
    catalog = Catalog()
    for text in (cql.create_keyspace(KS).text, cql.create_keyspace(KS, datacenters={"dc1": 3}).text):
        stmt, _ = parse(text)
        assert isinstance(stmt, CreateKeyspace)
    catalog.create_keyspace(parse(cql.create_keyspace(KS).text)[0])  # type: ignore[arg-type]
    for schema in SCHEMAS:
        stmt, markers = parse(cql.create_table(KS, schema).text)
        analyze(stmt, markers, catalog, None)
        catalog.create_table(KS, stmt)  # type: ignore[arg-type]
    return catalog


def _statements(schema: TableSchema) -> list[cql.Cql]:
    key = [c.name for c in schema.key_columns]
    pk = [c.name for c in schema.partition_key]
    cells = [c.name for c in schema.columns]
    out = [
        cql.upsert(KS, schema.name, key, cells),
        cql.upsert(KS, schema.name, key, cells[:1]),
        cql.delete(KS, schema.name, key),
        cql.delete(KS, schema.name, key, cells),
        cql.delete(KS, schema.name, pk),
        cql.select_row(KS, schema),
        cql.select_token_range(KS, schema),
    ]
    n = len(schema.clustering_key)
    for start in range(n + 1):
        for end in range(n + 1):
            for reverse in (False, True):
                for limit in (False, True):
                    out.append(
                        cql.select_partition(
                            KS, schema, start_len=start, end_len=end, reverse=reverse, limit=limit
                        )
                    )
    return out


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.name)
def test_adapter_statements_bind_exactly_the_adapter_markers(schema: TableSchema) -> None:
    catalog = _catalog()
    table = catalog.table(KS, schema.name)
    assert table.engine_schema() == TableSchema(**{**schema.__dict__, "default_ttl": None})
    assert (table.default_ttl, table.comment) == (schema.default_ttl or 0, cql.column_order_comment(schema))
    for statement in _statements(schema):
        stmt, markers = parse(statement.text)
        analyzed = analyze(stmt, markers, catalog, None)
        assert tuple(b.name for b in analyzed.binds) == statement.markers, statement.text


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("SELECT a FROM t WHERE a = 1 OR a = 2", "OR in WHERE"),
        ("SELECT JSON a FROM t", "SELECT JSON"),
        ("SELECT DISTINCT a FROM t", "SELECT DISTINCT"),
        ("SELECT a FROM t GROUP BY a", "GROUP BY"),
        ("SELECT a FROM t PER PARTITION LIMIT 1", "PER PARTITION LIMIT"),
        ("SELECT a FROM t WHERE a CONTAINS 1", "CONTAINS restrictions"),
        ("SELECT a FROM t WHERE a != 1", "!= restrictions"),
        ("UPDATE t SET m['k'] = 'v' WHERE a = 1", "collection element"),
        ("UPDATE t SET l = [1] WHERE a = 1", "collection and tuple literals"),
        ("DELETE m['k'] FROM t WHERE a = 1", "collection element"),
        ("DELETE FROM t USING TTL 5 WHERE a = 1", "USING TTL in DELETE"),
        ("BEGIN BATCH UPDATE t SET a = 1 WHERE b = 2; APPLY BATCH", "BEGIN BATCH"),
        ("CREATE INDEX i ON t (a)", "CREATE INDEX"),
        ("CREATE TABLE t (a text PRIMARY KEY, b text STATIC)", "STATIC columns"),
        ("CREATE TABLE t (a text PRIMARY KEY, b text) WITH COMPACT STORAGE", "COMPACT STORAGE"),
        ("CREATE TABLE t (a frozen<list<text>> PRIMARY KEY)", "type frozen<...>"),
        (
            "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy'} AND graph_engine = 'x'",
            "graph_engine",
        ),
        ("SELECT a FROM t WHERE a = now()", "function now()"),
        ("SELECT a FROM t WHERE a = 1 extra", "mismatched input 'extra'"),
        ("SELECT a FROM t WHERE a = 'unterminated", "unexpected character"),
    ],
)
def test_constructs_outside_the_subset_are_syntax_errors_naming_them(text: str, names: str) -> None:
    with pytest.raises(CqlSyntaxError) as raised:
        parse(text)
    assert names in raised.value.message


def test_identifiers_quoting_literals_and_marker_order() -> None:
    stmt, markers = parse(
        'UPDATE "Ks"."T" USING TTL ? AND TIMESTAMP 5 SET "Quoted""Name" = ?, b = -2.5e3 WHERE K = 0xCAFE'
    )
    assert markers == 2
    assert str(stmt.table) == "Ks.T"  # type: ignore[union-attr]
    assert stmt.assignments[0][0] == 'Quoted"Name' and stmt.assignments[1][1].value == -2500.0  # type: ignore[union-attr]
    assert stmt.where[0].columns == ("k",) and stmt.where[0].terms[0].value == b"\xca\xfe"  # type: ignore[union-attr]
    assert stmt.ttl.index == 0 and stmt.assignments[0][1].index == 1  # type: ignore[union-attr]
