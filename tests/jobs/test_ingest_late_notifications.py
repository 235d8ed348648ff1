"""A notification consumer sees the entries of a batch the Spark ingestion job redoes (issue 22, case 10).

The job runs as a real subprocess (``converge spark ingest``, Spark ``local[1]``) on the
embedded stack and kills itself after the ``store`` process of batch 1 (the hidden flag
``--crash-after``, the ``kill_after`` hook). Another writer of the same store then records an entry; once it
is ``settle`` old a ``NotificationReader`` reads it and commits past it. The job runs again and
writes batch 1's entries; the consumer must read them, with every row key batch 1 changed.
Before the fix they carried the batch's recorded start, behind the consumer's checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from examples.activity_platform.app import app as reference_app
from examples.activity_platform.generator import generate_history
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.mutations import Upsert
from framework.jobs.batches import BatchInput
from framework.local_stack import StackInfo
from framework.notifications import Entry, NotificationReader
from framework.notifications.sink import write_notifications
from stores.open import open_wide_store
from tests.jobs.test_ingest import publish
from tests.jobs.test_ingest_faults import Job, _batch_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SETTLE = 1.0


async def _other_writer(url: str) -> None:
    """Another writer of the store records one batch (a row of its own table)."""
    store = await open_wide_store(url)
    try:
        row = Upsert("other_writer_rows", {"org_id": "o-other", "id": "r1"}, {"v": 1}, 1)
        assert await write_notifications(store, reference_app, "other/1", [row]) == 1
    finally:
        await store.close()


async def _read_all(url: str, checkpoints: Path) -> list[Entry]:
    """Every entry the consumer has not read yet, committed page by page."""
    store = await open_wide_store(url)
    cps = SqliteCheckpointStore(checkpoints)
    try:
        reader = NotificationReader(store, cps, "late-consumer", settle=SETTLE)
        found: list[Entry] = []
        while page := await reader.read(limit=50):
            found += page
            await reader.commit(page)
        return found
    finally:
        await cps.close()
        await store.close()


def _listed(entries: list[Entry], batch_id: str) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for e in entries:
        if e.batch_id == batch_id:
            assert not e.reread
            keys = {json.dumps(dict(k), sort_keys=True, default=str) for k in e.keys or ()}
            out.setdefault((e.tenant, e.table), set()).update(keys)
    return out


def test_a_batch_redone_after_a_crash_reaches_a_consumer_that_read_past_its_start(
    stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(5, 60)
    uid = uuid.uuid4().hex[:8]
    names = {t: f"{uid}-{t}" for t in history.by_topic()}
    publish(f"kafka://{stack.kafka_bootstrap}", history.by_topic(), names)
    job = Job(tmp_path, stack, sorted(names.values()), f"sqlite:///{tmp_path / 'jobs.db'}")
    consumer = tmp_path / "consumer.db"

    code, _ = job.run("store@1")
    assert code == -signal.SIGKILL and job.state().lagging() == ("notifications", "index")
    asyncio.run(_other_writer(job.store))
    time.sleep(SETTLE + 0.2)
    before = asyncio.run(_read_all(job.store, consumer))
    assert [e.batch_id for e in before] == ["other/1"]  # the consumer's checkpoint is past batch 1's start

    code, report = job.run(None)
    assert code == 0 and report is not None and report["repaired"] == {"1": ["notifications", "index"]}
    time.sleep(SETTLE + 0.2)
    after = asyncio.run(_read_all(job.store, consumer))
    got = _listed(after, f"{job.name}/1")
    assert got, "the consumer never saw batch 1"  # every entry of batch 1 was missed before the fix
    starts = [e for e in job.log() if e["phase"] == "start" and e["batch_id"] == 1]
    first = [e["input"] for e in starts if e["process"] == "store"]
    assert len(first) == 1  # batch 1's store process ran once, before the crash
    ranges = list(BatchInput.from_json(first[0]).ranges)
    expected: dict[tuple[str, str], Any] = asyncio.run(_batch_rows(stack.kafka_bootstrap, ranges))
    assert got == expected
    later = {e.batch_id for e in after} - {f"{job.name}/1"}
    assert later == {f"{job.name}/{b}" for b in report["batches"]}  # and every later batch
