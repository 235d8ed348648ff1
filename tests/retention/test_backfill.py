"""After retention, a Spark backfill of the whole archive brings nothing back (support desk).

Real parts: ``converge spark backfill`` on local Spark into a SQLite store,
the retention job with SQLite coordination.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from examples.support_desk.app import app
from examples.support_desk.generator import START_MICROS, generate_history
from examples.support_desk.history import deliver
from framework.aggregates.contributions import ContributionIndex
from framework.aggregates.targets import ViewTargets
from framework.cli import main
from framework.retention import DAY_US, run_retention
from framework.testing.index import MemoryIndex
from spark_batch.archive import write_jsonl
from stores.open import sqlite_url
from stores.sqlite import SqliteStore
from tests.retention.support import coordination

pytestmark = pytest.mark.slow

TABLES = ("ticket", "ticket_status_log", "ticket_comment")


async def _cells(path: Path) -> dict[str, dict[tuple[Any, ...], dict[str, tuple[Any, int]]]]:
    store = await SqliteStore.open(path)
    try:
        return {
            t: {
                tuple(r.key.values()): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                async for r in store.scan(t)
            }
            for t in TABLES
        }
    finally:
        await store.close()


async def _announce(*_: Any) -> None:
    """No worker reads the group topics here: the totals are not checked."""


async def _retain(path: Path, root: Path, now_s: float) -> Any:
    store = await SqliteStore.open(path)
    index = MemoryIndex()
    views = ViewTargets(index, ContributionIndex(store, app.aggregates, _announce))
    try:
        for p in app.projections:
            await index.ensure_index(p.alias, p.mappings)
        with coordination(root) as coord:
            return await run_retention(
                app, store, checkpoints=coord.checkpoints, locks=coord.locks, index=views, clock=lambda: now_s
            )
    finally:
        await store.close()


def test_backfill_after_retention_brings_nothing_back(tmp_path: Path) -> None:
    history = generate_history(5, 40)
    archive = tmp_path / "archive.jsonl"
    write_jsonl(deliver(history.events, 5), archive)
    db = tmp_path / "wide.db"
    backfill = [
        "spark",
        "backfill",
        str(archive),
        "--app",
        "examples.support_desk.app:app",
        "--wide-store",
        sqlite_url(db),
        "--dlq-root",
        str(tmp_path / "dlq"),
        "--quiet",
    ]
    assert main(backfill) == 0
    before = asyncio.run(_cells(db))
    now_s = (START_MICROS + 7 * DAY_US + 365 * DAY_US) / 1e6
    run = asyncio.run(_retain(db, tmp_path, now_s))
    assert not run.skipped
    after = asyncio.run(_cells(db))
    gone = sum(len(before[t]) - len(after[t]) for t in TABLES)
    assert gone > 0 and all(after[t] for t in TABLES)
    assert main(backfill) == 0  # the whole archive again, older events included
    assert asyncio.run(_cells(db)) == after
