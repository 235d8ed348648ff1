"""The behaviour every ``WideColumnStore`` must show (Cassandra's cell rules).

Use it by subclassing ``WideColumnContract`` in a test module and providing an
async fixture ``wide_store`` that yields a ``tests.stores.harness.WideStoreHarness``.
Schema evolution (``ensure_table`` may only add regular columns) is part of the
contract: ``tests.stores.evolution_contract``.
Tests use fresh table names, so the suite also runs against a shared cluster.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from framework.core.cells import Cell
from framework.core.mutations import Delete, LogState, Upsert
from framework.core.rows import Row
from framework.core.schema import SchemaError
from stores.base import WideColumnStore
from tests.stores.evolution_contract import SchemaEvolutionContract
from tests.stores.harness import WideStoreHarness, hub_schema, log_schema, timeline_schema, unique

K = {"org": "acme", "id": 7}


async def _table(h: WideStoreHarness, schema_fn, *args) -> tuple[WideColumnStore, str]:
    store = await h.store()
    name = unique(schema_fn.__name__.split("_")[0])
    await store.ensure_table(schema_fn(name, *args))
    return store, name


async def _scan(store: WideColumnStore, table: str, shard: int = 0, shards: int = 1) -> list[Row]:
    return [r async for r in store.scan(table, shard=shard, shards=shards)]


async def _values(store: WideColumnStore, table: str, key: dict = K) -> dict | None:  # noqa: B006
    row = await store.read_row(table, key)
    return None if row is None else row.values()


def _ck(rows: list[Row]) -> list[tuple]:
    return [(r.key["day"], r.key["seq"]) for r in rows]


class WideColumnContract(SchemaEvolutionContract):
    """Store-agnostic tests; needs the ``wide_store`` fixture (a WideStoreHarness)."""

    # -- cells, write times, last write wins -----------------------------------

    async def test_upsert_then_read_returns_values_and_writetimes(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        cells = {"title": "hi", "n": -5, "small": 3, "score": 1.5, "flag": True, "data": b"\x00\x01"}
        await store.apply([Upsert(t, K, cells, 100)])
        await store.apply([Upsert(t, K, {"title": "later"}, 200)])
        row = await store.read_row(t, K)
        assert row is not None and dict(row.key) == K
        assert row.values() == {**cells, "title": "later"}
        assert {type(v) for v in row.values().values()} == {str, int, float, bool, bytes}
        assert row.writetime("title") == 200 and row.writetime("n") == 100 and row.version == 200
        assert row.cells["n"] == Cell(-5, 100, None)
        assert await store.read_row(t, {"org": "acme", "id": 8}) is None

    async def test_last_write_wins_per_cell_in_any_order(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        older = Upsert(t, K, {"title": "old", "n": 1}, 10)
        newer = Upsert(t, K, {"title": "new"}, 20)
        other = {"org": "acme", "id": 8}
        await store.apply([newer])
        await store.apply([older])
        await store.apply([Upsert(t, other, {"title": "new"}, 20), Upsert(t, other, {"title": "old"}, 10)])
        assert await _values(store, t) == {"title": "new", "n": 1}
        assert await _values(store, t, other) == {"title": "new"}
        row = await store.read_row(t, K)
        assert row is not None and row.writetime("title") == 20 and row.writetime("n") == 10

    @pytest.mark.parametrize(
        ("column", "a", "b", "winner"),
        [
            ("n", -1, 1, -1),  # serialised two's complement: 0xff.. > 0x00..
            ("title", "apple", "banana", "banana"),
            ("title", "ab", "a", "ab"),
            ("flag", False, True, True),
            ("score", 1.0, 2.0, 2.0),
            ("data", b"\x01", b"\x00\xff", b"\x01"),
            ("score", 3, 2.5, 3.0),  # an int in a double column compares as the double 3.0
        ],
    )
    async def test_tie_on_writetime_larger_value_wins(
        self, wide_store: WideStoreHarness, column: str, a: object, b: object, winner: object
    ) -> None:
        store, t = await _table(wide_store, hub_schema)
        k2, k3 = {"org": "acme", "id": 8}, {"org": "acme", "id": 9}
        await store.apply([Upsert(t, K, {column: a}, 50)])
        await store.apply([Upsert(t, K, {column: b}, 50)])
        await store.apply([Upsert(t, k2, {column: b}, 50)])
        await store.apply([Upsert(t, k2, {column: a}, 50)])
        await store.apply([Upsert(t, k3, {column: b}, 50), Upsert(t, k3, {column: a}, 50)])
        for key in (K, k2, k3):
            assert await _values(store, t, key) == {column: winner}

    async def test_tie_on_writetime_tombstone_wins(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"title": "x", "n": 1, "small": 2}, 50)])
        await store.apply([Upsert(t, K, {"title": None}, 50), Delete(t, K, 50, ("n",))])
        await store.apply([Upsert(t, K, {"title": "y", "n": 9}, 50)])  # a later arrival at the tie
        assert await _values(store, t) == {"small": 2}
        await store.apply([Delete(t, K, 50)])
        await store.apply([Upsert(t, K, {"small": 3}, 50)])
        assert await store.read_row(t, K) is None

    async def test_tie_on_value_later_expiry_wins(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        k2 = {"org": "acme", "id": 8}
        now = wide_store.now()
        await store.apply([Upsert(t, K, {"title": "v"}, 50, ttl=1000)])
        await store.apply([Upsert(t, K, {"title": "v"}, 50, ttl=5000)])
        await store.apply([Upsert(t, k2, {"title": "v"}, 50, ttl=5000)])
        await store.apply([Upsert(t, k2, {"title": "v"}, 50, ttl=1000)])
        for key in (K, k2):
            row = await store.read_row(t, key)
            assert row is not None and row.cells["title"].expires_at is not None
            assert abs(row.cells["title"].expires_at - (now + 5000)) <= 2
        await store.apply([Upsert(t, K, {"title": "v"}, 50)])  # no TTL: loses the tie (CASSANDRA-14592)
        row = await store.read_row(t, K)
        assert row is not None and abs(row.cells["title"].expires_at - (now + 5000)) <= 2  # type: ignore[operator]

    async def test_tie_expiring_cell_beats_live_cell_whatever_the_values(
        self, wide_store: WideStoreHarness
    ) -> None:
        """Cassandra 4.x on a write-time tie: expiring beats live, the later expiry beats a greater
        value, a tombstone beats an expiring cell (``framework.core.cells``)."""
        store, t = await _table(wide_store, hub_schema)
        k2, k3 = {"org": "acme", "id": 8}, {"org": "acme", "id": 9}
        for key, batches in (
            (K, [[{"title": "b"}, None], [{"title": "a"}, 100_000]]),
            (k2, [[{"title": "a"}, 100_000], [{"title": "b"}, None]]),
        ):
            for cells, ttl in batches:
                await store.apply([Upsert(t, key, cells, 9, ttl=ttl)])
        await store.apply([Upsert(t, k3, {"title": "b"}, 9), Upsert(t, k3, {"title": "a"}, 9, ttl=100_000)])
        for key in (K, k2, k3):
            assert await _values(store, t, key) == {"title": "a"}
        await store.apply([Upsert(t, K, {"n": 5}, 9, ttl=1000)])
        await store.apply([Upsert(t, K, {"n": 1}, 9, ttl=5000)])
        await store.apply([Upsert(t, K, {"n": 9}, 9, ttl=1000)])
        assert await _values(store, t) == {"title": "a", "n": 1}
        await store.apply([Upsert(t, K, {"title": None}, 9), Delete(t, k2, 9, ("title",))])
        assert await store.read_row(t, K) is not None and await _values(store, t) == {"n": 1}
        assert await store.read_row(t, k2) is None

    async def test_tie_on_writetime_compares_doubles_by_their_bytes(
        self, wide_store: WideStoreHarness
    ) -> None:
        """-0.0 is 0x80.. serialised: it beats 2.5 (0x40..) and 0.0 on a tie; 0.0 loses to 2.5."""
        store, t = await _table(wide_store, hub_schema)
        k2, k3 = {"org": "acme", "id": 8}, {"org": "acme", "id": 9}
        await store.apply([Upsert(t, K, {"score": 2.5}, 9)])
        await store.apply([Upsert(t, K, {"score": -0.0}, 9)])
        await store.apply([Upsert(t, k2, {"score": -0.0}, 9), Upsert(t, k2, {"score": 0.0}, 9)])
        await store.apply([Upsert(t, k3, {"score": 0.0}, 9), Upsert(t, k3, {"score": 2.5}, 9)])
        for key, want in ((K, -1.0), (k2, -1.0)):
            row = await store.read_row(t, key)
            assert row is not None and row.values() == {"score": 0.0}
            assert math.copysign(1.0, row.cells["score"].value) == want  # type: ignore[arg-type]
        assert await _values(store, t, k3) == {"score": 2.5}

    # -- tombstones -------------------------------------------------------------

    async def test_row_tombstone_shadows_equal_and_lower_versions_only(
        self, wide_store: WideStoreHarness
    ) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"title": "a"}, 10), Upsert(t, K, {"n": 2}, 20)])
        await store.apply([Delete(t, K, 15)])
        assert await _values(store, t) == {"n": 2}
        await store.apply([Upsert(t, K, {"title": "eq"}, 15), Upsert(t, K, {"small": 1}, 14)])
        assert await _values(store, t) == {"n": 2}
        await store.apply([Upsert(t, K, {"title": "up"}, 16)])
        assert await _values(store, t) == {"n": 2, "title": "up"}

    async def test_row_tombstone_keeps_highest_version_and_precedes_late_writes(
        self, wide_store: WideStoreHarness
    ) -> None:
        store, t = await _table(wide_store, hub_schema)
        k2 = {"org": "acme", "id": 8}
        await store.apply([Delete(t, K, 30)])
        await store.apply([Delete(t, K, 5)])
        await store.apply([Delete(t, k2, 30), Delete(t, k2, 5)])
        for key in (K, k2):
            await store.apply([Upsert(t, key, {"title": "late", "n": 1}, 30)])
            await store.apply([Upsert(t, key, {"small": 4}, 29)])
            assert await store.read_row(t, key) is None
            await store.apply([Upsert(t, key, {"n": 3}, 31)])
            assert await _values(store, t, key) == {"n": 3}

    async def test_partition_tombstone_shadows_every_row_of_its_partition(
        self, wide_store: WideStoreHarness
    ) -> None:
        """``Delete`` with only the partition key of a clustered table: at or below its version,
        nothing of the partition survives, however late it arrives; other partitions keep theirs."""
        store, t = await _table(wide_store, timeline_schema)
        p, other = {"org": "o"}, {"org": "q"}

        def key(day: int, part: dict = p) -> dict:  # noqa: B006
            return {**part, "day": day, "seq": "s"}

        await store.apply([Upsert(t, key(d), {"note": f"n{d}"}, v) for d, v in ((1, 10), (2, 20), (3, 30))])
        await store.apply([Upsert(t, key(1, other), {"note": "x"}, 10)])
        await store.apply([Delete(t, p, 20)])
        await store.apply([Delete(t, p, 5)])  # a lower partition tombstone changes nothing
        assert _ck(await store.read_partition(t, p)) == [(3, "s")]
        await store.apply([Upsert(t, key(4), {"note": "eq"}, 20), Upsert(t, key(1), {"note": "lo"}, 1)])
        await store.apply([Upsert(t, key(2), {"weight": 1.0}, 21)])
        assert _ck(await store.read_partition(t, p)) == [(2, "s"), (3, "s")]
        assert _ck(await store.read_partition(t, p, reverse=True)) == [(3, "s"), (2, "s")]
        assert await store.read_row(t, key(1)) is None
        assert await _values(store, t, key(2)) == {"weight": 1.0}
        scanned = sorted((r.key["org"], r.key["day"]) for r in await _scan(store, t))
        assert scanned == [("o", 2), ("o", 3), ("q", 1)]
        with pytest.raises(SchemaError):
            await store.apply([Delete(t, p, 40, ("note",))])  # cells are deleted in one row only

    async def test_cell_tombstones_shadow_only_their_columns(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"title": "a", "n": 1, "small": 2}, 10)])
        await store.apply([Delete(t, K, 12, ("title", "n"))])
        assert await _values(store, t) == {"small": 2}
        await store.apply([Upsert(t, K, {"title": "eq"}, 12), Upsert(t, K, {"n": 5}, 13)])
        assert await _values(store, t) == {"small": 2, "n": 5}

    async def test_null_cell_is_a_tombstone(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"title": None, "n": 1}, 10)])
        await store.apply([Upsert(t, K, {"title": "lower"}, 9), Upsert(t, K, {"title": "equal"}, 10)])
        assert await _values(store, t) == {"n": 1}
        await store.apply([Upsert(t, K, {"n": None}, 11)])
        assert await store.read_row(t, K) is None
        await store.apply([Upsert(t, K, {"title": "higher"}, 11)])
        assert await _values(store, t) == {"title": "higher"}

    async def test_row_without_live_cells_is_absent_everywhere(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, timeline_schema)
        p = {"org": "o"}
        await store.apply([Upsert(t, {**p, "day": d, "seq": "s"}, {"note": f"n{d}"}, 10) for d in (1, 2, 3)])
        await store.apply([Delete(t, {**p, "day": 2, "seq": "s"}, 10)])
        await store.apply([Delete(t, {**p, "day": 3, "seq": "s"}, 10, ("note",))])
        assert await store.read_row(t, {**p, "day": 2, "seq": "s"}) is None
        assert _ck(await store.read_partition(t, p)) == [(1, "s")]
        assert _ck(await _scan(store, t)) == [(1, "s")]

    # -- TTL --------------------------------------------------------------------

    async def test_ttl_cells_expire(self, wide_store: WideStoreHarness) -> None:
        if wide_store.clock is None and not wide_store.sleepy_ttl:
            pytest.skip("store has no controllable clock and sleeping is disabled")
        store, t = await _table(wide_store, hub_schema)
        k2 = {"org": "acme", "id": 8}
        now = wide_store.now()
        await store.apply([Upsert(t, K, {"title": "brief"}, 10, ttl=1), Upsert(t, K, {"n": 1}, 10)])
        await store.apply([Upsert(t, k2, {"title": "brief", "n": 2}, 10, ttl=1)])
        if wide_store.clock is not None:
            row = await store.read_row(t, K)
            assert row is not None and row.values() == {"title": "brief", "n": 1}
            assert row.cells["title"].expires_at == math.floor(now) + 1
            wide_store.clock.advance(1.5)
        else:
            await asyncio.sleep(2.0)
        assert await _values(store, t) == {"n": 1}
        assert await store.read_row(t, k2) is None
        assert [r.key["id"] for r in await _scan(store, t)] == [7]

    async def test_default_ttl_applies_unless_the_upsert_sets_one(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema, 3600)
        now = wide_store.now()
        await store.apply([Upsert(t, K, {"title": "d"}, 1), Upsert(t, K, {"n": 1}, 1, ttl=60)])
        row = await store.read_row(t, K)
        assert row is not None
        assert abs(row.cells["title"].expires_at - (now + 3600)) <= 2  # type: ignore[operator]
        assert abs(row.cells["n"].expires_at - (now + 60)) <= 2  # type: ignore[operator]

    async def test_int_written_to_double_column_reads_as_float(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"score": 3}, 1)])
        values = await _values(store, t)
        assert values == {"score": 3.0} and type(values["score"]) is float  # type: ignore[index]

    # -- clustering ---------------------------------------------------------------

    async def _timeline(self, h: WideStoreHarness, order: str) -> tuple[WideColumnStore, str]:
        store, t = await _table(h, timeline_schema, order)
        keys = [(2, "b"), (1, "z"), (3, "a"), (2, "a"), (-1, "m"), (2, "ab")]
        await store.apply([Upsert(t, {"org": "o", "day": d, "seq": s}, {"note": s}, 1) for d, s in keys])
        await store.apply([Upsert(t, {"org": "other", "day": 2, "seq": "x"}, {"note": "x"}, 1)])
        return store, t

    @pytest.mark.parametrize("order", ["ASC", "DESC"])
    async def test_partition_rows_come_in_clustering_order(
        self, wide_store: WideStoreHarness, order: str
    ) -> None:
        store, t = await self._timeline(wide_store, order)
        asc = [(-1, "m"), (1, "z"), (2, "a"), (2, "ab"), (2, "b"), (3, "a")]
        declared = asc if order == "ASC" else asc[::-1]
        assert _ck(await store.read_partition(t, {"org": "o"})) == declared
        assert _ck(await store.read_partition(t, {"org": "o"}, reverse=True)) == declared[::-1]
        assert _ck(await store.read_partition(t, {"org": "none"})) == []

    @pytest.mark.parametrize("order", ["ASC", "DESC"])
    async def test_read_partitions_is_read_partition_of_each_key(
        self, wide_store: WideStoreHarness, order: str
    ) -> None:
        """Many partitions at once (more than one chunk of the SQLite engine's 256), with
        partition and row tombstones, absent and repeated keys: each read as on its own."""
        store, t = await self._timeline(wide_store, order)
        orgs = [f"p{i:03d}" for i in range(300)]
        rows = [{"org": o, "day": d, "seq": "s"} for o in orgs for d in (1, 2)]
        await store.apply([Upsert(t, k, {"note": f"{k['org']}{k['day']}"}, 5) for k in rows])
        await store.apply([Delete(t, {"org": "p007"}, 6)])  # the whole partition
        await store.apply([Upsert(t, {"org": "p007", "day": 9, "seq": "s"}, {"note": "after"}, 7)])
        await store.apply([Delete(t, {"org": "p100", "day": 1, "seq": "s"}, 6)])  # one row
        keys = [{"org": o} for o in ["o", "none", *orgs, "p007", "o", "other"]]
        together = await store.read_partitions(t, keys)
        alone = [await store.read_partition(t, k) for k in keys]
        assert together == alone
        assert _ck(together[1]) == [] and _ck(together[2 + 7]) == [(9, "s")]
        assert _ck(together[2 + 100]) == [(2, "s")] and len(together[0]) == 6

    async def test_read_rows_is_read_row_of_each_key(self, wide_store: WideStoreHarness) -> None:
        """Rows of a table with and without clustering columns, live, deleted, emptied,
        absent and repeated, many at once: each read as on its own."""
        hubs, h = await _table(wide_store, hub_schema)
        keys = [{"org": "o", "id": i} for i in range(300)]
        await hubs.apply([Upsert(h, k, {"title": f"t{k['id']}", "n": k["id"]}, 5) for k in keys])
        await hubs.apply([Delete(h, keys[3], 6), Delete(h, keys[4], 6, ("title", "n"))])
        await hubs.apply([Upsert(h, keys[3], {"n": 1}, 7)])
        wanted = [*keys, {"org": "o", "id": -1}, keys[0], keys[4]]
        together = await hubs.read_rows(h, wanted)
        assert together == [await hubs.read_row(h, k) for k in wanted]
        assert together[3] is not None and together[3].values() == {"n": 1}
        assert together[4] is None and together[300] is None and together[0] == together[301]
        timeline, t = await self._timeline(wide_store, "DESC")
        wanted_rows = (("o", 2, "a"), ("o", 9, "a"), ("other", 2, "x"))
        rows = [{"org": o, "day": d, "seq": q} for o, d, q in wanted_rows]
        assert await timeline.read_rows(t, rows) == [await timeline.read_row(t, k) for k in rows]

    @pytest.mark.parametrize("order", ["ASC", "DESC"])
    async def test_partition_ranges_limit_and_reverse(self, wide_store: WideStoreHarness, order: str) -> None:
        store, t = await self._timeline(wide_store, order)
        p = {"org": "o"}
        desc = order == "DESC"

        async def read(**kw: object) -> list[tuple]:
            rows = _ck(await store.read_partition(t, p, **kw))  # type: ignore[arg-type]
            assert rows == sorted(rows, reverse=desc)  # bounded reads keep the clustering order
            return sorted(rows)

        assert await read(start=[2]) == [(2, "a"), (2, "ab"), (2, "b"), (3, "a")]
        assert await read(end=[2]) == [(-1, "m"), (1, "z"), (2, "a"), (2, "ab"), (2, "b")]
        assert await read(start=[2, "ab"], end=[3]) == [(2, "ab"), (2, "b"), (3, "a")]
        assert await read(start=[1, "z"], end=[2, "ab"]) == [(1, "z"), (2, "a"), (2, "ab")]
        assert await read(start=[3, "b"]) == [] and await read(start=[2], end=[1]) == []
        first_two = _ck(await store.read_partition(t, p, limit=2))
        last_two = _ck(await store.read_partition(t, p, limit=2, reverse=True))
        assert first_two == ([(3, "a"), (2, "b")] if desc else [(-1, "m"), (1, "z")])
        assert last_two == ([(-1, "m"), (1, "z")] if desc else [(3, "a"), (2, "b")])
        ranged = _ck(await store.read_partition(t, p, start=[2], limit=2, reverse=not desc))
        assert ranged == [(3, "a"), (2, "b")]
        await store.apply([Delete(t, {**p, "day": -1, "seq": "m"}, 5)])  # limit counts live rows only
        ascending = _ck(await store.read_partition(t, p, limit=2, reverse=desc))
        assert ascending == [(1, "z"), (2, "a")]

    async def test_scan_shards_partition_the_rows_exactly(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, timeline_schema)
        expected = {(f"org{i}", d, "s") for i in range(15) for d in range(i % 3 + 1)}
        await store.apply([Upsert(t, {"org": o, "day": d, "seq": s}, {"note": o}, 1) for o, d, s in expected])
        await store.apply([Delete(t, {"org": "org0", "day": 0, "seq": "s"}, 1)])
        expected.discard(("org0", 0, "s"))
        whole = {(r.key["org"], r.key["day"], r.key["seq"]) for r in await _scan(store, t)}
        assert whole == expected
        for shards in (2, 3):
            seen: list[tuple] = []
            owner: dict[str, int] = {}
            for shard in range(shards):
                for r in await _scan(store, t, shard, shards):
                    seen.append((r.key["org"], r.key["day"], r.key["seq"]))
                    assert owner.setdefault(r.key["org"], shard) == shard  # a partition is in one shard
            assert len(seen) == len(set(seen)) and set(seen) == expected
        with pytest.raises(ValueError):
            await _scan(store, t, 3, 3)

    # -- state logs ----------------------------------------------------------------

    async def test_log_state_rows_are_rewritten_by_replays(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, log_schema)
        e = {"entity": "m1"}
        opened = LogState(t, e, "opened", 200, "ev2", 2, {"actor": "bob"})
        await store.apply([LogState(t, e, "sent", 100, "ev1", 1), opened])
        await store.apply([opened, LogState(t, e, "sent", 100, "ev1", 1)])
        rows = await store.read_partition(t, e)
        assert [(r.key["at"], r.key["event_id"], r.values()) for r in rows] == [
            (100, "ev1", {"state": "sent"}),
            (200, "ev2", {"state": "opened", "actor": "bob"}),
        ]

    # -- errors ---------------------------------------------------------------------

    @pytest.mark.parametrize(
        "bad",
        [
            lambda t: Upsert(t, K, {"n": "not an int"}, 1),
            lambda t: Upsert(t, K, {"small": 2**40}, 1),
            lambda t: Upsert(t, K, {"nope": 1}, 1),
            lambda t: Upsert(t, {"org": "acme"}, {"n": 1}, 1),
            lambda t: Upsert(t, {"org": "acme", "id": "7"}, {"n": 1}, 1),
            lambda t: Upsert(t + "_missing", K, {"n": 1}, 1),
            lambda t: Delete(t, K, 1, ("nope",)),
            lambda t: Delete(t, K, 1, ("id",)),
            lambda t: LogState(t, K, "sent", 1, "ev", 1),
        ],
    )
    async def test_a_bad_mutation_fails_the_batch_before_any_write(
        self, wide_store: WideStoreHarness, bad
    ) -> None:
        store, t = await _table(wide_store, hub_schema)
        with pytest.raises(SchemaError):
            await store.apply([Upsert(t, K, {"title": "good"}, 1), Delete(t, {**K, "id": 9}, 1), bad(t)])
        assert await store.read_row(t, K) is None
        assert await _scan(store, t) == []

    async def test_schema_lookup_and_read_errors(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        await store.ensure_table(hub_schema(t))  # idempotent
        assert store.schema(t) == hub_schema(t)
        with pytest.raises(SchemaError):
            store.schema(t + "_missing")
        with pytest.raises(SchemaError):
            await store.read_row(t, {"org": "acme"})
        with pytest.raises(SchemaError):
            await store.read_partition(t, {"id": 1})
        with pytest.raises(ValueError):
            await store.read_partition(t, {"org": "acme", "id": 1}, limit=-1)

    # -- concurrency and durability ---------------------------------------------------

    async def test_concurrent_applies_all_land(self, wide_store: WideStoreHarness) -> None:
        store, t = await _table(wide_store, hub_schema)
        writes = [store.apply([Upsert(t, {"org": "c", "id": i}, {"n": i}, i)]) for i in range(40)]
        writes += [store.apply([Upsert(t, {"org": "c", "id": 0}, {"n": -v}, v)]) for v in range(1, 40)]
        await asyncio.gather(*writes)
        rows = await _scan(store, t)
        assert sorted((r.key["id"], r.values()["n"]) for r in rows) == [(0, -39)] + [
            (i, i) for i in range(1, 40)
        ]

    async def test_writes_survive_close_and_reopen(self, wide_store: WideStoreHarness) -> None:
        if not wide_store.reopenable:
            pytest.skip("store cannot be reopened over the same data")
        store, t = await _table(wide_store, hub_schema)
        await store.apply([Upsert(t, K, {"title": "kept", "n": 1}, 5), Delete(t, K, 4)])
        await store.close()
        again = await wide_store.store()
        assert again.schema(t) == hub_schema(t)
        row = await again.read_row(t, K)
        assert row is not None and row.values() == {"title": "kept", "n": 1} and row.version == 5
        await again.apply([Upsert(t, K, {"small": 1}, 4)])  # the row tombstone at 4 is remembered too
        assert await _values(again, t) == {"title": "kept", "n": 1}
