"""The same join in batch: a backfill resolves the lookups from the archive's entry events and
writes exactly the rows (values and write times) the stream converges to."""

from __future__ import annotations

import random
from pathlib import Path

from pyspark.sql import SparkSession

from framework import Event
from framework.testing import Driver
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store
from tests.spark.support import run, sqlite_url
from tests.state.join_app import app, child, parent_set
from tests.testing.directory_app import note, owner_set
from tests.testing.test_lookup_topics import model

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
    assert run(_rows(url, "parent_row")) == expected["parent_row"]
    # the same joined values; the backfill writes each at its event's version, the stream one
    # above for each re-mapping with a changed entry (at most 3 per conversation here)
    versions = {e.event_id: e.version for e in events}
    backfilled = run(_rows(url, "msg"))
    assert {k: v for k, (v, _) in backfilled.items()} == {k: v for k, (v, _) in expected["msg"].items()}
    assert all(w == versions[f"c-{k[1]}"] for k, (_, w) in backfilled.items())
    assert all(0 <= w - versions[f"c-{k[1]}"] <= 3 for k, (_, w) in expected["msg"].items())


def _directory_history(rng: random.Random, h: int) -> list[Event]:
    """One history of ``tests.testing.directory_app`` under keys of its own (``h<h>-``): entries of up to
    three conversations at unique versions above every note's, notes of conversations with an entry."""
    versions = rng.sample(range(1000, 1100), rng.randint(1, 6))
    entries = [
        owner_set(f"h{h}-c{rng.randrange(3)}", rng.choice("ABC"), rng.choice("xy"), v) for v in versions
    ]
    convs = sorted({e.payload["conv"] for e in entries})
    notes = [note(f"h{h}-n{i}", rng.choice(convs), rng.choice(["hi", "yo"]), rng.randint(1, 999))
             for i in range(rng.randint(1, 5))]  # fmt: skip
    return entries + notes


def test_a_lookup_topic_no_agent_consumes_feeds_the_backfill(spark: SparkSession, tmp_path: Path) -> None:
    """Issue 22, case 3: 320 histories with disjoint keys, shuffled, duplicated and replayed, in one
    archive and one backfill; each history's rows are its model's (the mapping applied with the
    final entries, ``tests.testing.test_lookup_topics.model``). Before: every entry was parked at
    route and every note at lookup."""
    rng = random.Random(22)
    histories = [_directory_history(rng, h) for h in range(320)]
    archive_events = [e for history in histories for e in history for _ in range(rng.randint(1, 2))]
    rng.shuffle(archive_events)
    archive_events += archive_events[-rng.randint(1, 50) :]  # a replayed tail
    expected: dict = {}
    for history in histories:
        expected.update(model(history))
    assert len(expected) > 600
    archive = tmp_path / "directory.jsonl"
    write_jsonl(archive_events, archive)
    url = sqlite_url(tmp_path / "directory.db")
    report = backfill(spark, [str(archive)], url, app="tests.testing.directory_app:app", partitions=3)
    assert report.rejected == {} and report.samples == []
    assert report.entries == sum(e.type == "owner.set" for e in archive_events)
    assert report.applied == sum(e.type == "note.posted" for e in archive_events)
    got = {(k[0], k[1]): values for k, (values, _) in run(_rows(url, "dir_note")).items()}
    assert got == expected
