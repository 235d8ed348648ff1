"""Write semantics over the wire: TTL and unset rules, client timestamps, partition tombstones, USE."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.query import UNSET_VALUE

from framework.core.mutations import Delete, Upsert
from stores.cassandra import CassandraStore
from stores.cassandra import statements as cql
from tests.cql_server.tables import qualified, timeline
from tests.stores.harness import ManualClock, hub_schema, timeline_schema, unique
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import KEYSPACE, connect_cluster

# ruff: noqa: S608 - CQL text holds only generated table names

K = {"org": "acme", "id": 7}


@pytest.fixture()
def clock(cql_server: CqlServer) -> Iterator[ManualClock]:
    manual = ManualClock()
    cql_server.clock = manual
    try:
        yield manual
    finally:
        cql_server.clock = time.time


def _hub(session: Any, default_ttl: int | None = None) -> tuple[str, Any, Any]:
    schema = hub_schema(unique("hub"), default_ttl)
    session.execute(cql.create_table(KEYSPACE, schema).text)
    write = session.prepare(cql.upsert(KEYSPACE, schema.name, ["org", "id"], ["title", "n"]).text)
    read = session.prepare(cql.select_row(KEYSPACE, schema).text)
    return schema.name, write, read


def _cells(session: Any, read: Any) -> dict[str, tuple[Any, Any, Any]]:
    row = session.execute(read, ("acme", 7)).one()
    names = ["title", "n", "small", "score", "flag", "data"]
    return (
        {n: tuple(row[3 * i : 3 * i + 3]) for i, n in enumerate(names) if row[3 * i] is not None}
        if row
        else {}
    )


def test_ttl_rules_zero_null_unset_and_expiry(cql_session: Any, clock: ManualClock) -> None:
    _, write, read = _hub(cql_session, default_ttl=3600)
    cql_session.execute(write, (10, UNSET_VALUE, "default", 1, "acme", 7))  # unset TTL: the table default
    assert _cells(cql_session, read) == {"title": ("default", 10, 3600), "n": (1, 10, 3600)}
    cql_session.execute(write, (11, 0, "zero", UNSET_VALUE, "acme", 7))  # TTL 0: none, even over a default
    cql_session.execute(write, (11, None, UNSET_VALUE, 2, "acme", 7))  # null TTL: none; unset cell: untouched
    assert _cells(cql_session, read) == {"title": ("zero", 11, None), "n": (2, 11, None)}
    cql_session.execute(write, (12, 60, "brief", None, "acme", 7))  # null cell: a tombstone at 12
    clock.advance(59.5)
    assert _cells(cql_session, read) == {"title": ("brief", 12, 1)}
    clock.advance(1)
    assert _cells(cql_session, read) == {}
    cql_session.execute(write, (11, 0, UNSET_VALUE, 5, "acme", 7))  # below the tombstone: stays deleted
    assert _cells(cql_session, read) == {}


def test_a_write_without_using_timestamp_takes_the_client_timestamp(
    cql_server: CqlServer, cql_session: Any
) -> None:
    table = qualified(timeline(cql_session))
    cql_server.clock = lambda: 1_000.0  # the server's clock is far in the past
    try:
        before = int(time.time() * 1e6)
        cql_session.execute(
            f"UPDATE {table} SET note = 'x', weight = 3 WHERE org = 'o' AND day = 1 AND seq = 's'"
        )
        after = int(time.time() * 1e6)
    finally:
        cql_server.clock = time.time
    row = cql_session.execute(
        f"SELECT note, weight, WRITETIME(note) AS wt FROM {table} WHERE org = 'o'"
    ).one()
    assert (row.note, row.weight) == ("x", 3.0) and isinstance(row.weight, float)
    assert before <= row.wt <= after


async def test_a_partition_delete_shadows_rows_at_or_below_its_timestamp(
    cql_session: Any, clock: ManualClock
) -> None:
    store = CassandraStore(cql_session, KEYSPACE, clock=clock)
    t = unique("tl")
    await store.ensure_table(timeline_schema(t))
    key = {"org": "o", "seq": "s"}
    await store.apply([Upsert(t, {**key, "day": d}, {"note": f"n{d}"}, 10 + d) for d in range(4)])
    await store.apply([Upsert(t, {"org": "other", "day": 1, "seq": "s"}, {"note": "kept"}, 1)])
    await store.apply([Delete(t, {"org": "o"}, 12)])
    assert [r.key["day"] for r in await store.read_partition(t, {"org": "o"})] == [3]
    await store.apply(
        [Upsert(t, {**key, "day": 7}, {"note": "late"}, 12), Upsert(t, {**key, "day": 8}, {"note": "x"}, 5)]
    )
    await store.apply([Upsert(t, {**key, "day": 9}, {"note": "newer"}, 13)])
    assert [r.key["day"] for r in await store.read_partition(t, {"org": "o"})] == [3, 9]
    assert [r.values() for r in await store.read_partition(t, {"org": "other"})] == [{"note": "kept"}]
    await store.close()


def test_use_binds_the_connection_keyspace(cql_server: CqlServer, cql_session: Any) -> None:
    name = timeline(cql_session).name
    cluster = connect_cluster(cql_server.port)
    try:
        session = cluster.connect(KEYSPACE)  # sends USE on every connection
        session.execute(
            f"UPDATE {name} USING TIMESTAMP 5 SET note = 'here' WHERE org = 'o' AND day = 1 AND seq = 's'"
        )
        assert session.execute(f"SELECT note FROM {name} WHERE org = 'o'").one().note == "here"
    finally:
        cluster.shutdown()
