"""Token-ring arithmetic of the Cassandra store's sharded scans (no Cassandra server exists here).

No Cassandra server can be installed on this machine, so the ranges are
checked arithmetically over Murmur3's whole ring [-2**63, 2**63-1], partition
tokens come from the driver's own murmur3 of the routing key a bound
statement carries, and scans run against ``tests.stores.cassandra_fakes``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cassandra.metadata import Murmur3Token
from cassandra.murmur3 import murmur3 as pure_python_murmur3
from hypothesis import given
from hypothesis import strategies as st

from framework.core.mutations import CellValue, Upsert
from stores.cassandra import CassandraStore
from stores.cassandra.tokens import (
    MAX_TOKEN,
    MIN_TOKEN,
    RING_SIZE,
    ring_ranges,
    shard_of,
    shard_range,
    shard_ranges,
    token_of,
    unwrap,
)
from tests.stores.cassandra_fakes import Call, FakeSession, decode, rows_result, void_result
from tests.stores.harness import hub_schema, timeline_schema

tokens = st.integers(MIN_TOKEN, MAX_TOKEN)
shard_counts = st.one_of(st.integers(1, 300), st.integers(1, RING_SIZE))


def _assert_tiles_ring(ranges: list[tuple[int, int]]) -> None:
    assert ranges[0][0] == MIN_TOKEN and ranges[-1][1] == MAX_TOKEN
    for first, last in ranges:
        assert first <= last
    for (_, last), (first, _) in zip(ranges, ranges[1:], strict=False):
        assert first == last + 1  # no gap, no overlap
    assert sum(last - first + 1 for first, last in ranges) == RING_SIZE


@given(st.integers(1, 2000))
def test_shards_tile_the_ring_in_near_equal_parts(shards: int) -> None:
    ranges = shard_ranges(shards)
    assert len(ranges) == shards
    _assert_tiles_ring(ranges)
    sizes = {last - first + 1 for first, last in ranges}
    assert max(sizes) - min(sizes) <= 1


def test_shard_edges() -> None:
    assert shard_ranges(1) == [(MIN_TOKEN, MAX_TOKEN)]
    assert shard_ranges(2) == [(MIN_TOKEN, -1), (0, MAX_TOKEN)]
    assert shard_range(0, 4) == (MIN_TOKEN, -(2**62) - 1) and shard_range(3, 4) == (2**62, MAX_TOKEN)
    assert shard_range(RING_SIZE - 1, RING_SIZE) == (MAX_TOKEN, MAX_TOKEN)
    for bad in [(0, 0), (2, 2), (-1, 2), (0, RING_SIZE + 1), (True, 2), (0, 2.0)]:
        with pytest.raises(ValueError):
            shard_range(*bad)  # type: ignore[arg-type]


@given(tokens, shard_counts)
def test_every_token_is_in_exactly_the_shard_shard_of_names(token: int, shards: int) -> None:
    owner = shard_of(token, shards)
    first, last = shard_range(owner, shards)
    assert first <= token <= last
    if owner > 0:
        assert shard_range(owner - 1, shards)[1] < token
    if owner < shards - 1:
        assert shard_range(owner + 1, shards)[0] > token


def test_shard_of_ring_ends() -> None:
    for shards in (1, 2, 3, 7, 2**63, RING_SIZE):
        assert shard_of(MIN_TOKEN, shards) == 0 and shard_of(MAX_TOKEN, shards) == shards - 1
    with pytest.raises(ValueError):
        shard_of(MAX_TOKEN + 1, 2)


def test_unwrap_splits_ranges_that_pass_the_end_of_the_ring() -> None:
    assert unwrap(10, 20) == [(11, 20)]
    assert unwrap(20, 10) == [(21, MAX_TOKEN), (MIN_TOKEN, 10)]
    assert unwrap(MAX_TOKEN, 5) == [(MIN_TOKEN, 5)]
    assert unwrap(7, 7) == [(8, MAX_TOKEN), (MIN_TOKEN, 7)]  # one node: the whole ring
    assert unwrap(MIN_TOKEN, MAX_TOKEN) == [(MIN_TOKEN + 1, MAX_TOKEN)]  # MIN itself is never a key's token
    with pytest.raises(ValueError):
        unwrap(MIN_TOKEN - 1, 0)


@given(st.lists(tokens, max_size=12))
def test_ranges_of_node_tokens_tile_the_ring(node_tokens: list[int]) -> None:
    ranges = ring_ranges(node_tokens)
    _assert_tiles_ring(ranges)
    ends = {last for _, last in ranges}
    assert set(node_tokens) <= ends  # every node's range ends at its token


def test_token_of_is_the_drivers_murmur3_and_never_the_minimum() -> None:
    for key in (b"", b"a", b"123", b"\x00\x04acme\x00"):
        assert token_of(key) == pure_python_murmur3(key) == Murmur3Token.from_key(key).value
    assert token_of(b"123") == -7468325962851647638
    assert all(token_of(i.to_bytes(4, "big")) != MIN_TOKEN for i in range(2000))


# -- scans through the store ------------------------------------------------------------------------


@pytest.fixture()
async def fake() -> AsyncIterator[FakeSession]:
    session = FakeSession({"hub": hub_schema("hub"), "tl": timeline_schema("tl")})
    yield session
    session.shutdown()


async def test_scan_binds_each_shards_inclusive_token_range(fake: FakeSession) -> None:
    pages: dict[bytes | None, tuple[list[tuple], bytes | None]] = {
        None: ([("o1", 1, "a", "n", 3, None, None, None, None)], b"next"),
        b"next": ([("o2", 2, "b", None, None, None, 1.5, 4, 60)], None),
    }

    def responder(call: Call) -> object:
        rows, state = pages[call.paging_state]
        return rows_result(["org", "day", "seq", "note", "wn", "tn", "weight", "ww", "tw"], rows, state)

    fake.responder = responder
    store = CassandraStore(fake, "ks", fetch_size=1, clock=lambda: 100.0)
    await store.ensure_table(timeline_schema("tl"))
    for shard, shards in [(0, 1), (0, 3), (2, 3)]:
        fake.calls.clear()
        rows = [r async for r in store.scan("tl", shard=shard, shards=shards)]
        assert [(dict(r.key), r.values()) for r in rows] == [
            ({"org": "o1", "day": 1, "seq": "a"}, {"note": "n"}),
            ({"org": "o2", "day": 2, "seq": "b"}, {"weight": 1.5}),
        ]
        assert rows[1].cells["weight"].expires_at == 160
        first, second = fake.calls
        assert second.paging_state == b"next" and first.statement.fetch_size == 1
        assert decode(first.statement) == list(shard_range(shard, shards))
        assert first.statement.prepared_statement.query_string == (
            'SELECT "org", "day", "seq", "note", WRITETIME("note"), TTL("note"), '
            '"weight", WRITETIME("weight"), TTL("weight") FROM "ks"."tl" '
            'WHERE token("org") >= ? AND token("org") <= ?'
        )
    with pytest.raises(ValueError):
        store.scan("tl", shard=3, shards=3)  # rejected on the call, before iteration


async def test_written_partition_lands_in_exactly_one_scan_shard(fake: FakeSession) -> None:
    fake.responder = lambda call: void_result()
    store = CassandraStore(fake, "ks")
    await store.ensure_table(hub_schema("hub"))
    keys: list[dict[str, CellValue]] = [{"org": f"org{i}", "id": i * 7919} for i in range(60)]
    fake.calls.clear()
    await store.apply([Upsert("hub", k, {"n": 1}, 1) for k in keys])
    writes = fake.calls
    for shards in (1, 2, 5, 16):
        owners: dict[int, int] = {}
        for call in writes:
            token = token_of(call.statement.routing_key)  # what the driver routes by, and Cassandra stores by
            inside = [s for s, (lo, hi) in enumerate(shard_ranges(shards)) if lo <= token <= hi]
            assert inside == [shard_of(token, shards)]
            owners[inside[0]] = owners.get(inside[0], 0) + 1
        assert sum(owners.values()) == len(keys)
        assert shards == 1 or len(owners) > 1  # the keys spread over the ring
