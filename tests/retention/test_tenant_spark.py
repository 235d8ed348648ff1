"""The retention property through the batch layer: 300 hub histories in one store, one
``converge spark backfill`` per delivery part and one ``converge spark retention`` per run.

The histories (``hubs``, disjoint keys) are delivered part by part as in the
test kit's property: part 1, run 1, part 2, run 2 (three days later), then
the replays and the whole archive again and a third run at run 2's time.
After run 2 and at the end, each history's rows equal its model.

Real parts: local Spark, a SQLite store file, SQLite checkpoints and locks.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from spark_batch.archive import write_jsonl
from stores.open import sqlite_url
from stores.sqlite import SqliteStore
from tests.retention.hubs import RUN1, RUN2, hub_history, hub_model

pytestmark = pytest.mark.slow
SPEC = "tests.retention.hubs:app"
N = 300


async def _cells(path: Path) -> dict[str, dict[tuple[Any, ...], dict[str, tuple[Any, int]]]]:
    store = await SqliteStore.open(path)
    try:
        return {t: {tuple(r.key.values()): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                    async for r in store.scan(t)} for t in ("hub", "hub_note")}  # fmt: skip
    finally:
        await store.close()


def _check(path: Path, hists: list[Any]) -> int:
    got = asyncio.run(_cells(path))
    rows = 0
    for hist in hists:
        prefix = f"h{hist.h}-"
        mine = {t: {k: v for k, v in table.items() if k[0].startswith(prefix)} for t, table in got.items()}
        assert mine == hub_model(hist), hist.h
        rows += sum(map(len, mine.values()))
    return rows


def test_300_histories_through_spark_backfill_and_retention(tmp_path: Path) -> None:
    rng = random.Random(8)
    hists = [hub_history(rng, h) for h in range(N)]
    db = tmp_path / "wide.db"
    common = ["--app", SPEC, "--wide-store", sqlite_url(db), "--quiet"]
    jobs = ["--checkpoints", sqlite_url(tmp_path / "cp.db"), "--locks", sqlite_url(tmp_path / "locks.db")]

    def deliver(n: int, events: list[Any]) -> None:
        path = tmp_path / f"part{n}.jsonl"
        write_jsonl(events, path)
        assert main(["spark", "backfill", str(path), *common, "--dlq-root", str(tmp_path / "dlq")]) == 0

    def run(now_us: int) -> None:
        assert main(["spark", "retention", *common, *jobs, "--shards", "2", "--now", str(now_us / 1e6)]) == 0

    deliver(1, [e for h in hists for e in h.parts[0]])
    run(RUN1)
    deliver(2, [e for h in hists for e in h.parts[1]])
    run(RUN2)
    assert _check(db, hists) > N  # rows left to compare: the check is not vacuous
    deliver(3, [e for h in hists for e in (*h.parts[2], *h.events)])
    run(RUN2)
    _check(db, hists)
