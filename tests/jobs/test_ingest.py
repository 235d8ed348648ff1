"""The Spark micro-batch ingestion job, in process, on the embedded stack: both example apps.

Events are produced to topics of the test's own (the job routes by event
type, so any topic names do), read in capped batches by offset range, and
the store and index end equal to the app's oracle; the checkpoint store
records every batch complete in every process, and a second run with new
events reads only those.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.jobs.batches import JobCheckpoints
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import StackInfo
from framework.notifications import NOTIFICATION_TABLE, entry_from_row
from spark_batch.ingest import ingest, ingest_processes, prepare_ingest
from spark_batch.ingest_processes import IngestConfig
from spark_batch.io import WriteOptions
from stores.open import open_wide_store
from tests.examples.support_desk.compare import divergences
from tests.spark.support import TOMBSTONES, documents, sqlite_url, unique_alias

pytestmark = pytest.mark.slow

SPEC = "examples.support_desk.app:app"


def publish(broker: str, events: dict[str, list[Any]], names: dict[str, str]) -> dict[str, int]:
    """Produce each agent topic's events to the test's own topic for it (2 partitions each)."""

    async def run() -> dict[str, int]:
        await ensure_topics(broker, {names[t]: 2 for t in names})
        return {
            names[t]: await produce(broker, names[t], [(e.ordering_key.encode(), e.to_json()) for e in evs])
            for t, evs in events.items()
        }

    return asyncio.run(run())


async def _rows(url: str) -> list[list[Any]]:
    store = await open_wide_store(url)
    try:
        return [[r async for r in store.scan(t)] for t in ("ticket", "ticket_status_log", "ticket_comment")]
    finally:
        await store.close()


def test_support_desk_batches_end_in_the_oracle_state(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(11, 40)
    arrival = deliver(history.events, 11)
    half = len(arrival) // 2
    uid = uuid.uuid4().hex[:8]
    topics = {t: f"{uid}-{t}" for t in by_topic(arrival)}
    broker = f"kafka://{stack.kafka_bootstrap}"
    url, alias = sqlite_url(tmp_path / "wide.db"), unique_alias("tickets")
    cfg = IngestConfig(
        app=SPEC, broker=broker, store_url=url, job=f"desk-{uid}", es_url=stack.es_url, tombstones=TOMBSTONES,
        aliases={"tickets": alias}, opts=WriteOptions(batch_size=200), split=40,
        dlq_root=str(tmp_path / "dlq"),
    )  # fmt: skip
    prepare_ingest(cfg, alias=alias)
    names = [n for n, _ in ingest_processes(cfg)]
    checkpoints = SqliteCheckpointStore(tmp_path / "jobs.db")
    try:
        first = publish(broker, by_topic(arrival[:half]), topics)
        bad_topic = sorted(topics.values())[0]
        first[bad_topic] += asyncio.run(produce(broker, bad_topic, [(b"k", b"not json")]))
        run = ingest(spark, cfg, checkpoints, topics=sorted(topics.values()), max_offsets=25)
        # every partition's share in batches of at most 25 offsets
        assert len(run.batches) >= max(first.values()) // 2 // 25 and run.repaired == {}
        stores = [r["store"] for r in run.reports.values()]
        assert sum(r["parked"] for r in stores) == 1 and sum(sum(r["rejected"].values()) for r in stores) == 1
        assert sum(r["events"] for r in stores) == sum(first.values())
        state = asyncio.run(JobCheckpoints(checkpoints, cfg.job, names).state())
        assert state.complete and state.batch is not None and state.batch.batch_id == run.batches[-1]
        assert sum(r.end for r in state.batch.input.ranges) == sum(first.values())

        publish(broker, by_topic(arrival[half:]), topics)
        again = ingest(spark, cfg, checkpoints, topics=sorted(topics.values()))
        assert again.batches == [run.batches[-1] + 1]  # uncapped: all new offsets in one batch
        reports = again.reports[again.batches[0]]
        assert reports["store"]["events"] == len(arrival) - half and not reports["store"]["rejected"]
    finally:
        checkpoints.close_sync()
    tickets, status_log, comments = asyncio.run(_rows(url))
    docs = asyncio.run(documents(stack.es_url, alias))
    assert divergences(history, tickets, status_log, comments, docs) == []
    assert json.dumps(run.to_dict())  # the report is JSON
    entries = asyncio.run(_entries(url))
    batches = {f"{cfg.job}/{b}" for b in [*run.batches, *again.batches]}
    assert {e.batch_id for e in entries} == batches
    assert {e.table for e in entries} >= {"ticket", "ticket_status_log"}
    assert len({(e.batch_id, e.tenant, e.table) for e in entries}) == len(entries)  # one entry each
    assert all(e.reread or e.keys for e in entries)


async def _entries(url: str) -> list[Any]:
    store = await open_wide_store(url)
    try:
        return [entry_from_row(r) async for r in store.scan(NOTIFICATION_TABLE.name)]
    finally:
        await store.close()
