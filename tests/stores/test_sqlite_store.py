"""The shared store contract, plus adapter specifics, on the real SQLite store."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from framework.core.mutations import Upsert
from stores.errors import StoreError
from stores.sqlite.store import SqliteStore
from tests.stores.contract import WideColumnContract
from tests.stores.harness import ManualClock, WideStoreHarness, hub_schema, timeline_schema

K = {"org": "acme", "id": 7}


class TestSqliteContract(WideColumnContract):
    """The contract on a SQLite file with a manual clock (tiny pages, so scans cross pages)."""

    @pytest.fixture()
    async def wide_store(self, tmp_path: Path) -> AsyncIterator[WideStoreHarness]:
        clock = ManualClock()
        h = WideStoreHarness(
            open=lambda: SqliteStore.open(tmp_path / "store.db", clock=clock, page_size=2),
            clock=clock,
            reopenable=True,
        )
        yield h
        await h.close_all()


class TestSqliteContractMemoryRealClock(WideColumnContract):
    """The contract on ``:memory:`` with the real clock: the TTL test really waits ~2 s once."""

    @pytest.fixture()
    async def wide_store(self) -> AsyncIterator[WideStoreHarness]:
        h = WideStoreHarness(open=lambda: SqliteStore.open(":memory:"))
        yield h
        await h.close_all()


async def test_calls_run_on_one_worker_thread_off_the_loop(tmp_path: Path) -> None:
    threads: set[str] = set()

    def clock() -> float:
        threads.add(threading.current_thread().name)
        return 1000.0

    async with await SqliteStore.open(tmp_path / "s.db", clock=clock) as store:
        await store.ensure_table(hub_schema("hub"))
        await asyncio.gather(*(store.apply([Upsert("hub", K, {"n": i}, i)]) for i in range(20)))
        await asyncio.gather(*(store.read_row("hub", K) for _ in range(5)))
    assert len(threads) == 1 and threading.current_thread().name not in threads


async def test_scan_pages_are_fetched_lazily(tmp_path: Path) -> None:
    """Rows written after the first page was read still appear in later pages of the scan."""
    store = await SqliteStore.open(tmp_path / "s.db", page_size=2)
    try:
        await store.ensure_table(timeline_schema("tl"))
        await store.apply(
            [Upsert("tl", {"org": "a", "day": d, "seq": "s"}, {"note": "x"}, 1) for d in (1, 2)]
        )
        seen = []
        async for row in store.scan("tl"):
            seen.append(row.key["day"])
            if len(seen) == 1:
                await store.apply([Upsert("tl", {"org": "a", "day": 9, "seq": "s"}, {"note": "y"}, 1)])
        assert seen == [1, 2, 9]
    finally:
        await store.close()


async def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "s.db")
    await store.ensure_table(hub_schema("hub"))
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError):
        await store.read_row("hub", K)
    with pytest.raises(StoreError):
        await store.apply([Upsert("hub", K, {"n": 1}, 1)])


async def test_tables_lists_declared_tables(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        await store.ensure_table(hub_schema("b_hub"))
        await store.ensure_table(timeline_schema("a_tl"))
        assert await store.tables() == ["a_tl", "b_hub"]


def test_bad_page_size_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "s.db", page_size=0)


async def test_a_closed_store_refuses_work_as_a_transient_failure_never_the_messages(tmp_path: Path) -> None:
    """A worker's store closes while it stops; a write still in flight must be retried (and never
    acknowledged), not parked as if the message were bad."""
    from framework.runtime.errors import MessageError, SinkFailure, is_transient
    from framework.runtime.processor import bounded
    from stores.errors import StoreClosed

    hub = hub_schema("hub")
    store = SqliteStore(tmp_path / "closed.db")
    await store.ensure_table(hub)
    await store.close()
    write = Upsert(hub.name, {"org": "o", "id": 1}, {"title": "x"}, 1)
    with pytest.raises(StoreClosed):
        await store.apply([write])
    with pytest.raises(SinkFailure) as failure:
        await bounded("wide_column", 5.0, store.apply([write]))
    assert is_transient(failure.value) and not isinstance(failure.value, MessageError)
    with pytest.raises(StoreClosed):
        await store.read_row(hub.name, {"org": "o", "id": 1})
