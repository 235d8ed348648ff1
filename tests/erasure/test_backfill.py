"""A backfill of the archive after an erasure does not bring the subject back (local Spark, SQLite).

Both layers are checked: the erasure's tombstones at ``MAX_VERSION`` shadow the
archived writes in the store, and the backfill's mapping strips them through
the deny-list screen (shown by a ticket of the subject the erasure never saw:
no tombstone covers its row, yet its address never reaches the store).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from framework.erasure.declare import Subject
from framework.erasure.run import erase
from framework.erasure.verify import verify
from spark_batch.archive import write_jsonl
from spark_batch.backfill import backfill
from stores.open import open_wide_store

pytestmark = pytest.mark.slow
SPEC = "examples.support_desk.app:app"


async def _erase_and_verify(url: str, subject: Subject, key: bytes, *, erase_it: bool) -> list:
    store = await open_wide_store(url)
    try:
        if erase_it:
            await erase(app, subject, key=key, store=store)
        return await verify(app, subject, key=key, store=store)
    finally:
        await store.close()


async def _ticket_count(url: str) -> int:
    store = await open_wide_store(url)
    try:
        return len([r async for r in store.scan("ticket")])
    finally:
        await store.close()


def _mutations(report: object) -> int:
    return sum(n for by_kind in report.mutations.values() for n in by_kind.values())  # type: ignore[attr-defined]


def test_backfill_after_erasure(spark: SparkSession, tmp_path: Path, erasure_key: bytes) -> None:
    history = generate_history(23, 80)
    counts = Counter(
        str(e.payload["requester_email"]).lower() for e in history.events if "requester_email" in e.payload
    )
    subject = Subject("email", counts.most_common(1)[0][0])
    archive = tmp_path / "archive.jsonl"
    write_jsonl(history.events, archive)
    url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    first = backfill(spark, [str(archive)], url, app=SPEC)
    assert first.events == len(history.events) and not first.rejected
    assert asyncio.run(_erase_and_verify(url, subject, erasure_key, erase_it=False))  # residue before

    assert asyncio.run(_erase_and_verify(url, subject, erasure_key, erase_it=True)) == []
    again = backfill(spark, [str(archive)], url, app=SPEC)
    assert again.events == len(history.events) and not again.rejected
    assert _mutations(again) == _mutations(first)  # cells stripped, writes kept
    assert asyncio.run(_erase_and_verify(url, subject, erasure_key, erase_it=False)) == []

    # a ticket of the subject the erasure never saw: no tombstone covers its row, only the screen
    created = next(e for e in history.events if e.type == "ticket.created"
                   and str(e.payload["requester_email"]).lower() == subject.value)  # fmt: skip
    ref = f"{created.payload['tenant']}/{created.payload['source']}/late-1"
    late = replace(
        created, event_id="late-1", ordering_key=ref, payload={**created.payload, "external_id": "late-1"}
    )
    write_jsonl([late], tmp_path / "late.jsonl")
    third = backfill(spark, [str(tmp_path / "late.jsonl")], url, app=SPEC)
    assert third.applied == 1 and not third.rejected
    assert asyncio.run(_erase_and_verify(url, subject, erasure_key, erase_it=False)) == []
    assert asyncio.run(_ticket_count(url)) == len({e.ordering_key for e in history.events}) + 1
