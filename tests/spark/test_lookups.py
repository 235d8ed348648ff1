"""The same join in batch: a backfill resolves the lookups from the archive's entry events and
writes exactly the rows (values and write times) the stream converges to."""

from __future__ import annotations

import random
from pathlib import Path

from pyspark.sql import SparkSession

from framework.testing import Driver
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.spark.support import run, sqlite_url
from tests.state.join_app import app, child, parent_set

APP = "tests.state.join_app:app"


async def _rows(url: str, table: str) -> dict:
    store = await open_wide_store(url)
    try:
        return {tuple(r.key.values()): (r.values(), r.version) async for r in store.scan(table)}
    finally:
        await store.close()


def test_backfill_and_stream_agree_on_one_history(spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(16)
    events = []
    for i in range(12):
        conv = f"c{i}"
        for n, v in enumerate(sorted(rng.sample(range(1, 3000), rng.randint(0, 3)))):
            events.append(parent_set(conv, f"P{i}-{n}", f"L{n}", v))
    events += [child(f"m{j}", f"c{rng.randrange(12)}", f"b{j}", rng.randrange(1, 3000)) for j in range(80)]
    rng.shuffle(events)
    stream = [e for e in events for _ in range(rng.randint(1, 2))]
    with Driver(app) as d:
        d.send(stream)
        expected = {t: {tuple(r.key.values()): (r.values(), r.version) for r in d.rows(t)}
                    for t in ("msg", "parent_row")}  # fmt: skip
        pending = len(d.pending()["children"])
    assert expected["msg"] and pending  # some joined, some never get their entry
    archive = tmp_path / "events.jsonl"
    write_jsonl(events, archive)
    url = sqlite_url(tmp_path / "wide.db")
    report = backfill(spark, [str(archive)], url, app=APP, partitions=3)
    assert report.rejected == {"children": {"Missing": pending}}
    for table in ("msg", "parent_row"):
        assert run(_rows(url, table)) == expected[table], table
