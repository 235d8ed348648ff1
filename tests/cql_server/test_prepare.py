"""Prepared statements: bind metadata the driver serialises from, re-prepare on Unprepared, BATCH."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import ExecuteMessage, PreparedQueryNotFound
from cassandra.query import BatchStatement, BatchType

from stores.cassandra import statements as cql
from tests.cql_server.raw import RawConnection
from tests.cql_server.tables import qualified, timeline
from tests.stores.harness import hub_schema, unique
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import KEYSPACE

# ruff: noqa: S608 - CQL text holds only generated table names


def _binds(prepared: Any) -> list[tuple[str, str]]:
    return [(c.name, c.type.cql_parameterized_type()) for c in prepared.column_metadata]


def test_bind_metadata_of_the_adapter_statements(cql_session: Any) -> None:
    schema = hub_schema(unique("hub"))
    cql_session.execute(cql.create_table(KEYSPACE, schema).text)
    up = cql_session.prepare(cql.upsert(KEYSPACE, schema.name, ["org", "id"], ["title", "n"]).text)
    assert _binds(up) == [("[timestamp]", "bigint"), ("[ttl]", "int"), ("title", "varchar"), ("n", "bigint"),
                          ("org", "varchar"), ("id", "bigint")]  # fmt: skip
    assert up.routing_key_indexes == [4, 5]
    scan = cql_session.prepare(cql.select_token_range(KEYSPACE, schema).text)
    assert _binds(scan) == [("partition key token", "bigint")] * 2
    assert scan.routing_key_indexes is None
    tl = timeline(cql_session)
    part = cql_session.prepare(cql.select_partition(KEYSPACE, tl, start_len=2, end_len=1, limit=True).text)
    assert _binds(part) == [("org", "varchar"), ("day", "bigint"), ("seq", "varchar"), ("day", "bigint"),
                            ("[limit]", "int")]  # fmt: skip
    cells = ["note", "writetime(note)", "ttl(note)", "weight", "writetime(weight)", "ttl(weight)"]
    assert [c[2] for c in part.result_metadata] == ["org", "day", "seq", *cells]


def test_execute_after_the_server_forgot_its_statements_prepares_again(
    cql_server: CqlServer, cql_session: Any
) -> None:
    schema = timeline(cql_session)
    write = cql_session.prepare(
        f"UPDATE {qualified(schema)} USING TIMESTAMP ? SET note = ? WHERE org = ? AND day = ? AND seq = ?"
    )
    read = cql_session.prepare(
        f"SELECT note, WRITETIME(note) FROM {qualified(schema)} WHERE org = ? AND day = ? AND seq = ?"
    )
    cql_session.execute(write, (5, "first", "o", 1, "s"))
    assert cql_server.forget_prepared() >= 2
    prepares = cql_server.requests["PREPARE"]
    cql_session.execute(write, (6, "second", "o", 1, "s"))  # Unprepared (0x2500) -> PREPARE -> EXECUTE again
    assert tuple(cql_session.execute(read, ("o", 1, "s")).one()) == ("second", 6)
    assert cql_server.requests["PREPARE"] == prepares + 2


def test_an_unknown_prepared_id_is_answered_unprepared_with_the_id(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        conn.startup()
        msg = conn.request(ExecuteMessage(b"\x01\x02no-such-id", [], 1))
        assert isinstance(msg, PreparedQueryNotFound) and msg.code == 0x2500
        assert msg.info == b"\x01\x02no-such-id"


def test_a_batch_applies_all_its_writes_with_the_client_timestamp(
    cql_server: CqlServer, cql_session: Any
) -> None:
    schema = timeline(cql_session)
    table = qualified(schema)
    write = cql_session.prepare(f"UPDATE {table} SET note = ? WHERE org = ? AND day = ? AND seq = ?")
    batch = BatchStatement(BatchType.UNLOGGED)
    batch.add(write, ("a", "o", 1, "s"))
    batch.add(write, ("b", "p", 2, "s"))
    batch.add(f"DELETE note FROM {table} WHERE org = 'o' AND day = 9 AND seq = 's'")
    cql_server.clock = lambda: 1_000.0  # the server's own clock is far in the past
    try:
        before = int(time.time() * 1e6)
        cql_session.execute(batch)
        after = int(time.time() * 1e6)
    finally:
        cql_server.clock = time.time
    rows = list(cql_session.execute(f"SELECT org, note, WRITETIME(note) FROM {table}"))
    assert sorted((r.org, r.note) for r in rows) == [("o", "a"), ("p", "b")]
    assert all(before <= r.writetime_note <= after for r in rows)  # the request's timestamp (flag 0x20)
    record = cql_server.batches[-1]  # the server's log of applied batches
    assert (record.kind, record.statements) == (1, 3)
    assert record.partitions == {(KEYSPACE, schema.name, ("o",)), (KEYSPACE, schema.name, ("p",))}


def test_a_batch_with_an_invalid_write_applies_nothing(cql_server: CqlServer, cql_session: Any) -> None:
    schema = timeline(cql_session)
    last = cql_server.batches[-1] if cql_server.batches else None
    table = qualified(schema)
    batch = BatchStatement(BatchType.UNLOGGED)
    batch.add(f"UPDATE {table} SET note = 'kept?' WHERE org = 'o' AND day = 1 AND seq = 's'")
    batch.add(f"UPDATE {table} SET note = 'bad' WHERE org = 'o' AND day = 1")
    with pytest.raises(InvalidRequest, match="Some clustering keys are missing: seq"):
        cql_session.execute(batch)
    assert list(cql_session.execute(f"SELECT note FROM {table}")) == []
    assert (cql_server.batches[-1] if cql_server.batches else None) is last  # only applied batches are logged
