"""Partition writers: batches, bounded concurrency, retries of transient failures, bad units alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from framework.core.mutations import Mutation, Upsert
from framework.core.schema import Column, TableSchema
from framework.local_stack import StackInfo
from spark_batch.io import Unit, WriteOptions, apply_batched, bulk_batched, open_index
from stores.base import IndexOp
from stores.errors import TransientStoreError
from stores.sqlite.store import SqliteStore
from tests.spark.support import TOMBSTONES, unique_alias

FAST = WriteOptions(batch_size=10, concurrency=3, retries=5, backoff=0.001)
HUB_TABLE = TableSchema("hub", (Column("hub_id", "text"),), (Column("subject", "text"),))
MAPPINGS = {"properties": {"hub_id": {"type": "keyword"}, "subject": {"type": "text"}}}


class Flaky(SqliteStore):
    """A real SQLite store whose first applies fail transiently; it records the concurrency it saw."""

    def __init__(self, path: Path, failures: int) -> None:
        super().__init__(path)
        self.failures, self.in_flight, self.peak, self.calls = failures, 0, 0, 0

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.002)
            if self.failures > 0:
                self.failures -= 1
                raise TransientStoreError("database is locked")
            await super().apply(mutations)
        finally:
            self.in_flight -= 1


def _unit(i: int, table: str = HUB_TABLE.name) -> Unit:
    return "test", [Upsert(table, {"hub_id": f"h{i}"}, {"subject": f"s{i}"}, 1_000 + i)]


async def test_apply_retries_transient_failures_within_the_concurrency_bound(tmp_path: Path) -> None:
    store = Flaky(tmp_path / "wide.db", failures=4)
    await store.ensure_table(HUB_TABLE)
    outcomes: list[tuple[str, BaseException | None]] = []
    try:
        await apply_batched(
            store, (_unit(i) for i in range(95)), FAST, lambda u, e: outcomes.append((u[0], e))
        )
        assert len(outcomes) == 95 and all(e is None for _, e in outcomes)
        assert store.calls == 10 + 4 and 1 < store.peak <= FAST.concurrency
        rows = [r async for r in store.scan(HUB_TABLE.name)]
        assert len(rows) == 95
    finally:
        await store.close()


async def test_a_permanently_bad_unit_is_rejected_alone(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "wide.db")
    await store.ensure_table(HUB_TABLE)
    units = [_unit(i) for i in range(8)]
    units[5] = _unit(5, table="no_such_table")
    failed: list[Unit] = []
    try:
        await apply_batched(store, units, FAST, lambda u, e: failed.append(u) if e is not None else None)
        assert failed == [units[5]]
        assert len([r async for r in store.scan(HUB_TABLE.name)]) == 7
    finally:
        await store.close()


async def test_bulk_writes_in_batches_and_counts_stale_versions(stack: StackInfo) -> None:
    index = open_index(stack.es_url, TOMBSTONES)
    alias = unique_alias("bulk")
    try:
        await index.ensure_index(alias, MAPPINGS)
        ops = [IndexOp(f"d{i}", 10, {"hub_id": f"d{i}", "subject": "new"}) for i in range(25)]
        assert await bulk_batched(index, alias, ops, FAST) == {"ok": 25}
        older = [IndexOp(f"d{i}", 5, {"hub_id": f"d{i}", "subject": "old"}) for i in range(25)]
        assert await bulk_batched(index, alias, older, FAST) == {"stale": 25}
        hit = await index.get(alias, "d7")
        assert hit is not None and hit.source["subject"] == "new" and hit.version == 10
    finally:
        await index.close()
