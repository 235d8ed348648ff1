"""The SQLite store with its writes in a child process (``SqliteStore(writer="process")``).

The whole store contract runs on it; then what only this mode has: requests sent while the
child writes are answered in order and committed together, a bad mutation fails only its own
caller's write, a child killed mid-stream fails the writes in flight as transient (never as
the message's fault) and the next write starts a new child, and values of every type cross
the wire exactly.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from framework.core.mutations import Delete, Upsert
from framework.core.schema import Column, SchemaError, TableSchema
from stores.errors import TransientStoreError
from stores.sqlite.store import SqliteStore
from tests.stores.contract import WideColumnContract
from tests.stores.harness import ManualClock, WideStoreHarness, hub_schema

K = {"org": "acme", "id": 7}
TYPES = TableSchema(
    "typed",
    partition_key=(Column("k", "text"),),
    columns=(
        Column("i", "bigint"),
        Column("d", "double"),
        Column("b", "blob"),
        Column("t", "boolean"),
        Column("s", "text"),
    ),
)


class TestSqliteWriterProcessContract(WideColumnContract):
    """The contract with every write applied by the child (manual clock, tiny pages)."""

    @pytest.fixture()
    async def wide_store(self, tmp_path: Path) -> AsyncIterator[WideStoreHarness]:
        clock = ManualClock()
        h = WideStoreHarness(
            open=lambda: SqliteStore.open(tmp_path / "store.db", clock=clock, page_size=2, writer="process"),
            clock=clock,
            reopenable=True,
        )
        yield h
        await h.close_all()


def test_an_in_memory_database_cannot_have_a_writer_process() -> None:
    with pytest.raises(ValueError, match="file path"):
        SqliteStore(":memory:", writer="process")
    with pytest.raises(ValueError, match="writer"):
        SqliteStore(":memory:", writer="fork")  # type: ignore[arg-type]


async def test_writes_sent_together_are_committed_and_answered_in_order(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "s.db", writer="process")
    try:
        await store.ensure_table(hub_schema("hub"))
        writes = [store.apply([Upsert("hub", {"org": "o", "id": i}, {"n": i}, 10 + i)]) for i in range(200)]
        await asyncio.gather(*writes)
        rows = await store.read_rows("hub", [{"org": "o", "id": i} for i in range(200)])
        assert [r.cells["n"].value for r in rows if r is not None] == list(range(200))
        assert store._writer is not None and store._writer.started == 1
    finally:
        await store.close()


async def test_a_bad_mutation_fails_only_its_own_write(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "s.db", writer="process")
    try:
        await store.ensure_table(hub_schema("hub"))
        good = [store.apply([Upsert("hub", {"org": "o", "id": i}, {"n": i}, 1)]) for i in range(3)]
        bad = store.apply([Upsert("hub", {"org": "o", "id": 9}, {"no_such_column": 1}, 1)])
        results = await asyncio.gather(*good, bad, return_exceptions=True)
        assert results[:3] == [None, None, None]
        assert isinstance(results[3], SchemaError) and results[3].field == "no_such_column"
        assert await store.read_row("hub", {"org": "o", "id": 9}) is None
        assert (await store.read_row("hub", {"org": "o", "id": 2})) is not None
    finally:
        await store.close()


async def test_values_of_every_type_cross_to_the_child_exactly(tmp_path: Path) -> None:
    cells = {"i": -(2**63), "d": -0.0, "b": b"\x00\xff\x80", "t": True, "s": "é\u2028\x00"}
    store = await SqliteStore.open(tmp_path / "s.db", writer="process")
    try:
        await store.ensure_table(TYPES)
        infinite = Upsert("typed", {"k": "b"}, {"d": math.inf}, 5)
        await store.apply([Upsert("typed", {"k": "a"}, cells, 5), infinite])
        await store.apply([Delete("typed", {"k": "a"}, 6, columns=("t",))])
        a = await store.read_row("typed", {"k": "a"})
        b = await store.read_row("typed", {"k": "b"})
        assert a is not None and b is not None
        got = {n: c.value for n, c in a.cells.items()}
        assert got == {n: v for n, v in cells.items() if n != "t"} and math.copysign(1, got["d"]) == -1
        assert b.cells["d"].value == math.inf
    finally:
        await store.close()


async def test_a_child_killed_mid_write_fails_it_as_transient_and_the_next_write_starts_a_new_one(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "s.db", writer="process")
    try:
        await store.ensure_table(hub_schema("hub"))
        await store.apply([Upsert("hub", K, {"n": 1}, 1)])
        writer = store._writer
        assert writer is not None and writer._proc is not None
        big = [Upsert("hub", {"org": "o", "id": i}, {"n": i}, 2) for i in range(50_000)]
        in_flight = asyncio.ensure_future(store.apply(big))
        await asyncio.sleep(0.05)  # sent, not yet answered: 50,000 rows take the child longer
        os.kill(writer._proc.pid, signal.SIGKILL)
        with pytest.raises(TransientStoreError, match="writer process"):
            await in_flight
        await store.apply([Upsert("hub", K, {"n": 3}, 3)])  # a new child
        assert writer.started == 2
        row = await store.read_row("hub", K)
        assert row is not None and row.cells["n"].value == 3
    finally:
        await store.close()
