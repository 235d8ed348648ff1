"""``converge spark backfill`` after erasures, over 300 histories in one store (local Spark, SQLite).

Issue 22 case 7: a backfill into a fresh store restored erased subjects (the
store had no deny-list). Now it refuses a store without one, and with the
store of record named (``denylist_store``, the CLI's ``--denylist-store``)
copies its deny-list and screens against it. Issue 42: a store whose tables a worker
created (an empty deny-list table) is refused the same way, and screened once the store
of record is named.

The erasure property through the batch layer: 300 histories of the notes
app (``histories``, disjoint keys) are backfilled in two parts around the
erasure of their subjects (each requested in a random spelling), the second
part with duplicates and the whole archive again; then the whole archive is
backfilled into a fresh store with the first named as the store of record.
Each history of each store is compared with the model.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.core.events import Event
from framework.erasure import Subject, erase, verify
from spark_batch.apps import JobError
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store, sqlite_url
from tests.erasure.histories import History, check_notes, delivery, history, mentions_erased, model_people
from tests.erasure.notes_app import app

pytestmark = pytest.mark.slow
SPEC = "tests.erasure.notes_app:app"
N = 300


async def _erase_all(url: str, key: bytes, hists: Sequence[History]) -> None:
    store = await open_wide_store(url)
    try:
        for hist in hists:
            for value in hist.requests:
                await erase(app, Subject("email", value), key=key, store=store)
    finally:
        await store.close()


async def _read(url: str, key: bytes, probes: Sequence[str]) -> tuple[dict, dict, list]:
    store = await open_wide_store(url)
    try:
        people = {str(r.key["email"]): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                  async for r in store.scan("person")}  # fmt: skip
        notes = {str(r.key["note_id"]): {c: (x.value, x.writetime) for c, x in r.cells.items()}
                 async for r in store.scan("note")}  # fmt: skip
        residue = [r for v in probes for r in await verify(app, Subject("email", v), key=key, store=store)]
        return people, notes, residue
    finally:
        await store.close()


async def _create_tables(url: str) -> None:
    """Every table of the app and the deny-list's, empty, as a worker's start creates them."""
    from framework.erasure.tables import ERASURE_TABLES

    store = await open_wide_store(url)
    try:
        for schema in (*app.tables, *ERASURE_TABLES):
            await store.ensure_table(schema)
    finally:
        await store.close()


def _check(hists: Sequence[History], people: dict, notes: dict) -> None:
    for hist in hists:
        mine = {k: v for k, v in people.items() if k.lower().endswith(f"@x{hist.h}.io")}
        assert mine and mine == model_people(hist), hist.h
        check_notes(hist, {k: v for k, v in notes.items() if k.startswith(f"note{hist.h}-")})
    texts = [*people, *(str(v) for c in (*people.values(), *notes.values()) for v, _ in c.values())]
    for hist in hists:
        assert mentions_erased(hist, texts) == [], hist.h


def test_backfills_around_erasures_of_300_histories(
    spark: SparkSession, tmp_path: Path, erasure_key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(22)
    hists = [history(rng, h, size=6, most=1) for h in range(N)]  # one erasure each: each scans the store
    before: list[Event] = []
    after: list[Event] = []
    for hist in hists:
        sent = delivery(rng, hist.events)
        at = rng.randint(0, len(sent))
        before += sent[:at]
        after += sent[at:] + delivery(rng, hist.events) + list(hist.events)
    rng.shuffle(after)
    write_jsonl(before, tmp_path / "before.jsonl")
    write_jsonl(after, tmp_path / "after.jsonl")
    record, fresh = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "fresh.db")

    first = backfill(spark, [str(tmp_path / "before.jsonl")], record, app=SPEC, partitions=2)
    assert first.events == len(before) and not first.rejected
    asyncio.run(_erase_all(record, erasure_key, hists))
    second = backfill(spark, [str(tmp_path / "after.jsonl")], record, app=SPEC, partitions=2)
    assert second.events == len(after) and not second.rejected

    monkeypatch.delenv("CONVERGE_DENYLIST_STORE", raising=False)
    with pytest.raises(JobError, match="no erasure deny-list"):  # case 7: refused before any Spark job
        backfill(spark, [str(tmp_path / "after.jsonl")], fresh, app=SPEC)
    made = sqlite_url(tmp_path / "made.db")  # the tables a worker creates: an empty deny-list table
    asyncio.run(_create_tables(made))
    with pytest.raises(JobError, match="no erasure deny-list"):  # an empty table is no deny-list of record
        backfill(spark, [str(tmp_path / "after.jsonl")], made, app=SPEC)
    paths = [str(tmp_path / "after.jsonl")]
    third = backfill(spark, paths, fresh, app=SPEC, partitions=2, denylist_store=record)
    assert third.events == len(after) and not third.rejected
    fourth = backfill(spark, paths, made, app=SPEC, partitions=2, denylist_store=record)
    assert fourth.events == len(after) and not fourth.rejected

    probes = [hists[i].requests[0].swapcase() for i in (0, N // 2, N - 1)]
    for url in (record, fresh, made):
        people, notes, residue = asyncio.run(_read(url, erasure_key, probes))
        assert residue == [], url
        _check(hists, people, notes)
