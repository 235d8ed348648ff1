"""Statements outside the subset are refused with an error naming the construct; the connection lives on."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.protocol import SyntaxException

from stores.cassandra import statements as cql
from tests.cql_server.tables import qualified, timeline
from tests.support.cql_server.fixtures import KEYSPACE

# ruff: noqa: S608 - CQL text holds only generated table names

# {t}: a fresh table; org (partition key), day bigint and seq text (clustering), note text, weight double


@pytest.mark.parametrize(
    ("text", "error", "names"),
    [
        ("INSERT INTO {t} (org, day, seq, note) VALUES ('o', 1, 's', 'x')", SyntaxException, "INSERT"),
        ("SELECT note FROM {t} WHERE org IN ('a', 'b')", SyntaxException, "IN restrictions"),
        ("UPDATE {t} SET note = 'x' WHERE org = 'o' AND day = 1 AND seq = 's' IF note = 'y'", SyntaxException,
         "conditional UPDATE"),
        ("SELECT count(*) FROM {t}", SyntaxException, "function count()"),
        ("DROP TABLE {t}", SyntaxException, "DROP statement"),
        ("SELECT note FROM {t} WHERE org = 'o' AND (day) > (1)", SyntaxException, "exclusive clustering"),
        ("DELETE FROM {t} WHERE org = 'o' AND day = 1", SyntaxException, "range deletions"),
        ("UPDATE {t} SET note = note + 'x' WHERE org = 'o' AND day = 1 AND seq = 's'", SyntaxException,
         "counter and collection arithmetic"),
        ("SELEC note FROM {t}", SyntaxException, "SELEC statement"),
        ("SELECT note FROM {t} WHERE org = :org", SyntaxException, "named bind markers"),
        ("SELECT note FROM converge_test.nope", InvalidRequest, "unconfigured table nope"),
        ("SELECT note FROM system.size_estimates", InvalidRequest, "unconfigured table size_estimates"),
        ("SELECT note FROM {t} WHERE note = 'x' ALLOW FILTERING", InvalidRequest, "regular column note"),
        ("SELECT nope FROM {t}", InvalidRequest, "Undefined column name nope"),
        ("UPDATE {t} SET note = 'x' WHERE org = 'o' AND day = 1", InvalidRequest, "keys are missing: seq"),
        ("UPDATE {t} SET note = 1 WHERE org = 'o' AND day = 1 AND seq = 's'", InvalidRequest, "INT constant"),
        ("SELECT note FROM {t} WHERE org = 'o' ORDER BY seq DESC", InvalidRequest, "Order by currently"),
        ("SELECT WRITETIME(org) FROM {t}", InvalidRequest, "PRIMARY KEY part org"),
        ("CREATE TABLE {ks}.c1 (a text PRIMARY KEY, m map<text, text>)", SyntaxException, "type map<...>"),
        ("CREATE TABLE {ks}.c2 (a timestamp PRIMARY KEY, b text)", InvalidRequest, "column type timestamp"),
        ("CREATE TABLE {ks}.c3 (a text PRIMARY KEY, b text) WITH gc_grace_seconds = 1", InvalidRequest,
         "table option gc_grace_seconds"),
        ("CREATE TABLE {ks}.c4 (a text, b text, c text, PRIMARY KEY (a, b, c)) WITH CLUSTERING ORDER BY "
         "(b ASC, c DESC)", InvalidRequest, "mixed clustering orders"),
        ("CREATE TABLE nokeyspace.c5 (a text PRIMARY KEY, b text)", InvalidRequest, "'nokeyspace' does not"),
        ("UPDATE system.local SET cluster_name = 'x' WHERE key = 'local'", InvalidRequest, "user-modifiable"),
        ("ALTER TABLE {t} DROP note", SyntaxException, "ALTER TABLE .. DROP"),
        ("ALTER TABLE {t} ALTER note TYPE blob", SyntaxException, "ALTER TABLE .. ALTER"),
        ("ALTER TABLE {t} ADD IF NOT EXISTS x text", SyntaxException, "ADD IF NOT EXISTS"),
        ("ALTER KEYSPACE {ks} WITH durable_writes = false", SyntaxException, "ALTER KEYSPACE"),
        ("ALTER TABLE {t} ADD note text", InvalidRequest, "conflicts with an existing column"),
        ("ALTER TABLE {t} ADD x timestamp", InvalidRequest, "column type timestamp"),
        ("ALTER TABLE {t} WITH gc_grace_seconds = 1", InvalidRequest, "table option gc_grace_seconds"),
        ("ALTER TABLE {ks}.nope ADD x text", InvalidRequest, "unconfigured table nope"),
    ],
)  # fmt: skip
def test_a_statement_outside_the_subset_is_refused_by_name(
    cql_session: Any, text: str, error: type, names: str
) -> None:
    table = qualified(timeline(cql_session))
    with pytest.raises(error) as raised:
        cql_session.execute(text.format(t=table, ks=KEYSPACE))
    assert names in str(raised.value)
    assert cql_session.execute("SELECT key FROM system.local").one()[0] == "local"  # still connected


def test_preparing_an_unsupported_statement_fails_the_same_way(cql_session: Any) -> None:
    table = qualified(timeline(cql_session))
    with pytest.raises(SyntaxException, match="IN restrictions"):
        cql_session.prepare(f"SELECT note FROM {table} WHERE org IN ?")


def test_creating_an_existing_table_without_if_not_exists_is_already_exists(cql_session: Any) -> None:
    schema = timeline(cql_session)
    text = cql.create_table(KEYSPACE, schema).text.replace(" IF NOT EXISTS", "")
    with pytest.raises(AlreadyExists) as raised:
        cql_session.execute(text)
    assert (raised.value.keyspace, raised.value.table) == (KEYSPACE, schema.name)
    cql_session.execute(cql.create_table(KEYSPACE, schema).text)  # IF NOT EXISTS: no error


def test_without_a_keyspace_an_unqualified_table_is_invalid(cql_session: Any) -> None:
    with pytest.raises(InvalidRequest, match="No keyspace has been specified"):
        cql_session.execute("SELECT note FROM sometable")
