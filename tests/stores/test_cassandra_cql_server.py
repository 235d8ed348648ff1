"""The store contract and the convergence properties on CassandraStore, through the real driver.

The Cassandra adapter talks to ``tests.support.cql_server`` (a CQL protocol-v4
test double over a loopback socket, storing with the embedded engine's cell
rules) through cassandra-driver: prepared statements, bind metadata, paging,
token-aware routing and schema metadata all go over the wire. The server's
clock is the test's ManualClock, so TTL expiry needs no sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from framework.core.mutations import Delete, Upsert
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerConfig
from stores.base import WideColumnStore
from stores.cassandra import CassandraStore
from stores.errors import PermanentStoreError
from tests.stores.contract import WideColumnContract
from tests.stores.convergence import HUB, LOG, Case, cases, check_current_state, check_history
from tests.stores.harness import ManualClock, WideStoreHarness, hub_schema, timeline_schema, unique
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import KEYSPACE, cql_server, cql_session

__all__ = ["cql_server", "cql_session"]  # fixtures, imported for pytest

#: Small pages, so every multi-row read crosses pages over the wire.
FETCH_SIZE = 3
#: Examples per convergence property (SQLite runs 500). An example here costs ~30 round trips over the
#: socket (two CREATE TABLEs, each followed by the driver's schema refresh, then prepares, writes and
#: paged reads); 300 examples keep the three properties near 25 s on the shared 2-core machine.
EXAMPLES = 300


@pytest.fixture()
def server_clock(cql_server: CqlServer) -> Iterator[ManualClock]:
    """A ManualClock that is the server's clock for one test."""
    clock = ManualClock()
    cql_server.clock = clock
    try:
        yield clock
    finally:
        cql_server.clock = time.time


def _store(session: Any, clock: ManualClock) -> CassandraStore:
    return CassandraStore(session, KEYSPACE, clock=clock, fetch_size=FETCH_SIZE)


class TestCassandraOverCqlServer(WideColumnContract):
    """The contract: a fresh CassandraStore per ``open`` over the shared session (reopen = new store)."""

    @pytest.fixture()
    async def wide_store(
        self, cql_session: Any, server_clock: ManualClock
    ) -> AsyncIterator[WideStoreHarness]:
        async def open_store() -> WideColumnStore:
            return _store(cql_session, server_clock)

        h = WideStoreHarness(open=open_store, clock=server_clock, reopenable=True)
        yield h
        await h.close_all()


async def test_connect_from_url_creates_the_keyspace_and_pages_scans(cql_server: CqlServer) -> None:
    """The production path: ``from_url`` opens its own Cluster, creates the keyspace, pages a scan."""
    keyspace = unique("ks")
    url = f"cassandra://127.0.0.1:{cql_server.port}/{keyspace}?create_keyspace=true&fetch_size=4"
    store = await CassandraStore.from_url(url)
    try:
        t = unique("hub")
        await store.ensure_table(hub_schema(t))
        await store.apply([Upsert(t, {"org": "o", "id": i}, {"n": i}, 1_000_000 + i) for i in range(10)])
        rows = [r async for r in store.scan(t)]
        assert sorted((r.key["id"], r.writetime("n")) for r in rows) == [
            (i, 1_000_000 + i) for i in range(10)
        ]
        assert keyspace in cql_server.storage.catalog.keyspaces
    finally:
        await store.close()


async def test_existing_table_is_described_by_the_driver_metadata(cql_session: Any) -> None:
    """A store over tables it did not declare reads their schema from system_schema, via the driver."""
    t = unique("tl")
    first = _store(cql_session, ManualClock())
    await first.ensure_table(timeline_schema(t, "DESC"))
    await first.close()
    again = _store(cql_session, ManualClock())
    assert again.schema(t) == timeline_schema(t, "DESC")


def _factory(server: CqlServer, session: Any):  # type: ignore[no-untyped-def]
    async def make_store(clock: ManualClock) -> WideColumnStore:
        server.clock = clock
        return _store(session, clock)

    return make_store


def _names() -> dict[str, str]:
    return {HUB: unique("conv_hub"), LOG: unique("conv_log")}


def _check(cql_server: CqlServer, cql_session: Any, check: Any, case: Case) -> None:
    """Run one property check through the server, restoring its clock afterwards."""
    try:
        asyncio.run(check(_factory(cql_server, cql_session), case, _names()))
    finally:
        cql_server.clock = time.time


_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(case=cases())
def test_any_delivery_of_a_history_converges_to_the_oracle(
    cql_server: CqlServer, cql_session: Any, case: Case
) -> None:
    _check(cql_server, cql_session, check_history, case)


@_SETTINGS
@given(case=cases(hub=False))
def test_current_state_of_a_shuffled_log_matches_the_oracle(
    cql_server: CqlServer, cql_session: Any, case: Case
) -> None:
    _check(cql_server, cql_session, check_current_state, case)


@_SETTINGS
@given(case=cases(log=False, hub_keys=1))
def test_any_delivery_of_one_row_history_converges_to_the_oracle(
    cql_server: CqlServer, cql_session: Any, case: Case
) -> None:
    """All writes on one row: ties, tombstones and batch splits collide as often as possible."""
    _check(cql_server, cql_session, check_history, case)


async def test_a_new_delivery_consumer_adds_its_column_to_an_existing_ledger(cql_session: Any) -> None:
    """The delivery ledger's ``ensure`` on Cassandra: a restarted writer declaring one more consumer
    gets its ack column by ``ALTER TABLE .. ADD``; the rows written before keep their acks."""
    clock = ManualClock()
    table = unique("ledger")
    old_store, new_store = _store(cql_session, clock), _store(cql_session, clock)
    old = DeliveryLedger(old_store, LedgerConfig(consumers=("search",), table=table), clock=clock)
    await old.ensure()
    ref = await old.register("m1", "exchange")
    await old.ack("m1", "search")
    new = DeliveryLedger(new_store, LedgerConfig(consumers=("billing", "search"), table=table), clock=clock)
    await new.ensure()
    assert [c.name for c in new_store.schema(table).columns][-2:] == ["ack_search", "ack_billing"]
    entry = await new.read(ref)
    assert entry is not None and entry.expect == ("search",) and entry.delivered
    ref2 = await new.register("m2", "exchange")
    await new.ack("m2", "billing")
    assert (await new.read(ref2)).missing == ("search",)  # type: ignore[union-attr]
    assert [c.name for c in _store(cql_session, clock).schema(table).columns][-2:] == [
        "ack_search",
        "ack_billing",
    ]


# -- writes grouped per partition (one UNLOGGED batch per partition, capped) ------------------------


def _tl(t: str, org: str, day: int, note: str | None = "x", version: int = 10) -> Upsert:
    return Upsert(t, {"org": org, "day": day, "seq": "s"}, {"note": note}, version)


class _Sent:
    """The requests a block of code sent to the server, and the batches it applied."""

    def __init__(self, server: CqlServer) -> None:
        self.server = server
        self.before = dict(server.requests)
        server.batches.clear()

    def count(self, opcode: str) -> int:
        return self.server.requests[opcode] - self.before.get(opcode, 0)


async def test_writes_of_several_partitions_land_and_no_batch_mixes_partitions(
    cql_server: CqlServer, cql_session: Any, server_clock: ManualClock
) -> None:
    store = _store(cql_session, server_clock)
    tl, hub = unique("tl"), unique("hub")
    await store.ensure_table(timeline_schema(tl))
    await store.ensure_table(hub_schema(hub))
    mutations = [
        *(_tl(tl, "a", day) for day in range(5)),
        _tl(tl, "b", 1),
        _tl(tl, "b", 2),
        Delete(tl, {"org": "b", "day": 2, "seq": "s"}, 11),  # same partition, later version: the row goes
        _tl(tl, "c", 1),  # a partition of one write: a lone EXECUTE
        Upsert(hub, {"org": "a", "id": 1}, {"n": 1}, 10),  # the same "a" in another table: its own request
        Upsert(hub, {"org": "a", "id": 1}, {"title": "t"}, 10),
        Upsert(hub, {"org": "a", "id": 2}, {"n": 2}, 10),
    ]
    sent = _Sent(cql_server)
    await store.apply(mutations)
    assert (sent.count("BATCH"), sent.count("EXECUTE")) == (3, 2)
    assert all(b.kind == 1 and len(b.partitions) == 1 for b in cql_server.batches)  # UNLOGGED, one partition
    assert sorted((next(iter(b.partitions)), b.statements) for b in cql_server.batches) == [
        ((KEYSPACE, hub, ("a", 1)), 2),
        ((KEYSPACE, tl, ("a",)), 5),
        ((KEYSPACE, tl, ("b",)), 3),
    ]
    rows = {org: await store.read_partition(tl, {"org": org}) for org in "abc"}
    assert {org: [r.key["day"] for r in found] for org, found in rows.items()} == {
        "a": [0, 1, 2, 3, 4],
        "b": [1],
        "c": [1],
    }
    row = await store.read_row(hub, {"org": "a", "id": 1})
    assert row is not None and row.values() == {"n": 1, "title": "t"} and row.writetime("n") == 10
    assert (await store.read_row(hub, {"org": "a", "id": 2})) is not None


async def test_a_failing_statement_fails_its_partition_batch_with_a_permanent_error(
    cql_server: CqlServer, cql_session: Any, server_clock: ManualClock
) -> None:
    """An empty partition key passes the schema but Cassandra (and the server) refuse it: the batch
    of that partition fails as a whole and permanently; the other partitions' requests still land."""
    store = _store(cql_session, server_clock)
    tl = unique("tl")
    await store.ensure_table(timeline_schema(tl))
    sent = _Sent(cql_server)
    with pytest.raises(PermanentStoreError, match="Key may not be empty") as info:
        await store.apply([*(_tl(tl, "", day) for day in range(3)), _tl(tl, "a", 1), _tl(tl, "a", 2)])
    assert "3 of 5 writes failed (1 of 2 requests)" in info.value.__notes__
    assert sent.count("BATCH") == 2 and [b.partitions for b in cql_server.batches] == [
        frozenset({(KEYSPACE, tl, ("a",))})
    ]
    assert [r.key["day"] for r in await store.read_partition(tl, {"org": "a"})] == [1, 2]
    with pytest.raises(PermanentStoreError, match="Key may not be empty"):
        await store.apply([_tl(tl, "", 1)])  # alone, as an EXECUTE: the same error class


@pytest.mark.parametrize(
    ("cap", "rows", "batches", "lone"), [(100, 250, [50, 100, 100], 0), (7, 15, [7, 7], 1)]
)
async def test_a_big_partition_group_is_split_at_the_cap(
    cql_server: CqlServer,
    cql_session: Any,
    server_clock: ManualClock,
    cap: int,
    rows: int,
    batches: list[int],
    lone: int,
) -> None:
    store = CassandraStore(cql_session, KEYSPACE, clock=server_clock, max_batch_statements=cap)
    tl = unique("tl")
    await store.ensure_table(timeline_schema(tl))
    sent = _Sent(cql_server)
    await store.apply([_tl(tl, "a", day) for day in range(rows)])
    assert sorted(b.statements for b in cql_server.batches) == batches
    assert (sent.count("BATCH"), sent.count("EXECUTE")) == (len(batches), lone)
    assert len(await store.read_partition(tl, {"org": "a"})) == rows


async def test_a_batch_is_prepared_again_after_the_server_forgot_its_statements(
    cql_server: CqlServer, cql_session: Any, server_clock: ManualClock
) -> None:
    store = _store(cql_session, server_clock)
    tl = unique("tl")
    await store.ensure_table(timeline_schema(tl))
    await store.apply([_tl(tl, "a", 1, "old"), _tl(tl, "a", 2, "old")])
    cql_server.forget_prepared()
    sent = _Sent(cql_server)
    await store.apply([_tl(tl, "a", 1, "new", 11), _tl(tl, "a", 2, "new", 11)])  # 0x2500 -> PREPARE -> BATCH
    assert sent.count("PREPARE") >= 1 and sent.count("BATCH") == 2
    assert [r.values()["note"] for r in await store.read_partition(tl, {"org": "a"})] == ["new", "new"]
