"""Issues 22 and 42 in batch: ``converge spark backfill``'s function over one archive of 320
two-lookup histories with disjoint keys (versions spaced 1 us, 1 ms, 1 s or a day; entries older
and newer than the events, ties, equal-version replacements with equal ranks, non-ASCII values;
shuffled, duplicated, a replayed tail) stores, per history, the cells of the model in
``tests.state.join_model``, each at its event's version, as the test driver does on the same
deliveries (there each at its event's version plus its re-mappings)."""

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
from tests.state import join_model as model
from tests.state.two_lookups_app import Cells, app, expected_cells, item, owner_set, tag_set

APP = "tests.state.two_lookups_app:app"
LABELS = ["a", "b", "z", "é", "Ω", "ab", "日本"]
TAGS = ["a", "b", "z", "ü", "€", "bb"]


SPACINGS = (1, 1_000, 1_000_000, 86_400_000_000)  # 1 us, 1 ms, 1 s, a day
T0 = 1_700_000_000_000_000


def history(rng: random.Random, h: int) -> tuple[list[Event], Cells, Cells, set[str]]:
    """One history under keys of its own (``h<h>-``), versions on a grid of real timestamps
    spaced as ``SPACINGS[h % 4]``: its events, the model's cells as the stream may write them
    (the event's version plus one per entry change) and as the backfill writes them (the event's
    version), the ids of its items that wait for an entry."""
    s = SPACINGS[h % len(SPACINGS)]

    def version() -> int:
        return T0 + s * rng.randint(1, 24)

    owners: dict[str, list[tuple[int, dict, Event]]] = {}
    for k in (f"h{h}-k0", f"h{h}-k1"):
        owners[k] = []
        for _ in range(rng.randint(0, 3)):
            v, value = version(), {"row": rng.choice(["r0", "r1"]), "label": rng.choice(LABELS),
                                   "note": rng.choice("xy")}  # fmt: skip
            owners[k].append((v, value, owner_set(k, value["row"], value["label"], value["note"], v)))
    tags: dict[str, list[tuple[int, dict, Event]]] = {}
    for k in (f"h{h}-t0", f"h{h}-t1"):
        tags[k] = []
        for _ in range(rng.randint(0, 3)):
            v, value = version(), {"tag": rng.choice(TAGS)}
            tags[k].append((v, value, tag_set(k, value["tag"], v)))
    entries = {e.event_id: e for per in (owners, tags) for es in per.values() for _, _, e in es}
    slack = len(entries)
    items, last = [], {}  # one thread's items lie more than ``slack`` us apart (the docs' limit)
    for i, v in enumerate(sorted(version() for _ in range(rng.randint(1, 5)))):
        thread = f"h{h}-th{rng.randrange(2)}"
        v = last[thread] = max(v, last.get(thread, v - slack - 1) + slack + 1)
        items.append(item(f"h{h}-m{i}", rng.choice(list(owners)), rng.choice(list(tags)), thread,
                          rng.choice("pq"), v))  # fmt: skip
    final_owner = {k: model.final_entry((v, x) for v, x, _ in es) for k, es in owners.items()}
    final_tag = {k: model.final_entry((v, x) for v, x, _ in es) for k, es in tags.items()}
    cells, waiting = expected_cells(items, final_owner, final_tag, slack)
    exact, _ = expected_cells(items, final_owner, final_tag, 0)
    return list(entries.values()) + items, cells, exact, waiting


async def _cells(url: str) -> Cells:
    store = await open_wide_store(url)
    try:
        out: Cells = {}
        for table in ("item", "thread"):
            async for r in store.scan(table):
                cells = {c: (x.value, x.writetime) for c, x in r.cells.items()}
                out[(table, tuple(r.key.values()))] = cells  # type: ignore[assignment]
        return out
    finally:
        await store.close()


def test_the_backfill_stores_each_history_mapped_once_with_its_final_entries(
    spark: SparkSession, tmp_path: Path
) -> None:
    rng = random.Random(2222)
    expected: Cells = {}
    exact: Cells = {}
    waiting: set[str] = set()
    archive_events: list[Event] = []
    for h in range(320):
        events, cells, once, pending = history(rng, h)
        expected.update(cells)
        exact.update(once)
        waiting |= pending
        archive_events += [e for e in events for _ in range(rng.randint(1, 2))]
    rng.shuffle(archive_events)
    archive_events += archive_events[-rng.randint(1, 50) :]  # a replayed tail
    assert sum(t == "item" for t, _ in expected) > 400 and waiting
    with Driver(app) as d:  # the stream on the same deliveries
        assert d.send(archive_events) == []
        streamed = {
            (table, tuple(r.key.values())): {c: (x.value, x.writetime) for c, x in r.cells.items()}
            for table in ("item", "thread")
            for r in d.rows(table)
        }
        assert {eid for eid, _, _ in d.pending()["items"]} == waiting
    assert streamed == expected
    archive = tmp_path / "two_lookups.jsonl"
    write_jsonl(archive_events, archive)
    url = sqlite_url(tmp_path / "two_lookups.db")
    report = backfill(spark, [str(archive)], url, app=APP, partitions=3)
    # rejected: every delivery of an item whose entry never came, and nothing else
    assert report.rejected == {"items": {"Missing": sum(e.event_id in waiting for e in archive_events)}}
    assert run(_cells(url)) == exact  # the same values, each at its event's version
