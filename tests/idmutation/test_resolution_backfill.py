"""The backfill resolves owner ids as the stream does: the map read from ``converge_id_map``,
broadcast, applied to plain and join agents; the archive's rows equal those the test driver
stores for the same events with the same map. Real parts: local Spark, a SQLite store."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.idmutation import IdRequest, collapse, map_topic_of
from framework.idmutation.resolution import mapped_event
from framework.idmutation.tables import MAP_TABLE, map_row
from framework.testing import Driver
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.idmutation.stream_app import activity, app, linked, note, status
from tests.spark.support import run, sqlite_url

pytestmark = pytest.mark.slow

APP = "tests.idmutation.stream_app:app"
TABLES = ("owner_activity", "owner_log")


async def _rows(url: str, table: str) -> dict:
    store = await open_wide_store(url)
    try:
        return {tuple(r.key.values()): {n: (c.value, c.writetime) for n, c in r.cells.items()}
                async for r in store.scan(table)}  # fmt: skip
    finally:
        await store.close()


async def _write_map(url: str, collapsed: dict) -> None:
    store = await open_wide_store(url)
    try:
        await store.ensure_table(MAP_TABLE)
        await store.apply([map_row(t, i, iv, 1, 1) for (t, i), iv in collapsed.items()])
    finally:
        await store.close()


def test_backfill_and_stream_store_the_same_resolved_rows(spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(7)
    requests = [
        IdRequest(100, "r1", "t1", "convert", "a", "b"),
        IdRequest(150, "r2", "t1", "merge", "b", "c"),
        IdRequest(120, "r3", "t1", "delete", "d"),
        IdRequest(50, "r4", "t1", "convert", "e", "f"),
    ]
    collapsed = collapse(requests)
    events = [activity(f"e{i}", "t1", rng.choice("abcdef"), rng.choice(("x", "y")), rng.randrange(1, 300),
                       body=f"b{i}") for i in range(60)]  # fmt: skip
    events += [status(f"s{i}", "t1", rng.choice("abcdef"), "won", rng.randrange(1, 300)) for i in range(20)]
    events += [linked("l1", "t1", "a", "th1", 30), linked("l2", "t1", "d", "th2", 30)]
    events += [note(f"n{i}", rng.choice(("th1", "th2")), f"note{i}", f"n{i}", rng.randrange(1, 300))
               for i in range(10)]  # fmt: skip
    with Driver(app) as d:
        for (tenant, ident), intervals in collapsed.items():
            d.send(mapped_event(tenant, ident, intervals, 1), topic=map_topic_of(app.name))
        links = [e for e in events if e.type == "thread.linked"]
        assert d.send(links + [e for e in events if e not in links]) == []
        expected = {t: {tuple(r.key.values()): {n: (c.value, c.writetime) for n, c in r.cells.items()}
                        for r in d.rows(t)} for t in TABLES}  # fmt: skip
    owners = {k[1] for k in expected["owner_activity"]} | {k[1] for k in expected["owner_log"]}
    assert owners <= {"c", "f"} and "c" in owners  # everything resolved; d's rows dropped
    archive = tmp_path / "events.jsonl"
    write_jsonl(events, archive)
    url = sqlite_url(tmp_path / "wide.db")
    run(_write_map(url, collapsed))
    report = backfill(spark, [str(archive)], url, app=APP, partitions=3)
    assert report.rejected == {}
    for table in TABLES:
        assert run(_rows(url, table)) == expected[table], table
