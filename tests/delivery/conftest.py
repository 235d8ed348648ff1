"""Fixtures: an injected clock, a SQLite wide-column store and a two-consumer ledger on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerConfig
from stores.sqlite.store import SqliteStore
from tests.support.zookeeper import zookeeper_server

__all__ = ["zookeeper_server", "Clock", "T0", "MIN", "snapshot"]

#: A bucket-aligned start time (2024-01-01T00:00:00Z) in seconds.
T0 = 1_704_067_200.0
MIN = 60.0


class Clock:
    """A settable clock (seconds), injected into the ledger, the store and the verifier."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def us(self, offset_s: float = 0.0) -> int:
        return int((self.now + offset_s) * 1_000_000)


async def snapshot(ledger: DeliveryLedger) -> dict[str, list[tuple]]:
    """Every live cell of the ledger and index tables with its write time, in key order."""
    out: dict[str, list[tuple]] = {}
    for table in (ledger.config.table, ledger.config.index_table):
        rows = [
            (
                tuple(sorted(row.key.items())),
                tuple(sorted((n, c.value, c.writetime) for n, c in row.cells.items())),
            )
            async for row in ledger.store.scan(table)
        ]
        out[table] = sorted(rows)
    return out


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[SqliteStore]:
    s = await SqliteStore.open(tmp_path / "wide.db", clock=clock)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture()
async def ledger(store: SqliteStore, clock: Clock) -> DeliveryLedger:
    """A ledger with consumers ``search`` and ``timeline``, 10-minute buckets, 2 shards."""
    lg = DeliveryLedger(store, LedgerConfig(consumers=("search", "timeline"), shards=2), clock=clock)
    await lg.ensure()
    return lg
