"""The Spark ingestion job parks a record whose Kafka key is not its event's ordering key, as the
stream does (issue 22, case 9): stage ``key`` in the dead-letter WAL, nothing of it in the store
or the notifications. Local Spark in this process, the support desk app on the embedded
broker, real SQLite stores."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.dlq import DeadLetterStore
from framework.kafka_admin import produce
from framework.local_stack import StackInfo
from framework.notifications import NOTIFICATION_TABLE, entry_from_row
from spark_batch.ingest import ingest, prepare_ingest
from spark_batch.ingest_processes import IngestConfig
from spark_batch.io import WriteOptions
from stores.open import open_wide_store
from tests.jobs.test_ingest import publish
from tests.spark.support import sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = "examples.support_desk.app:app"
STRAY_KEYS = [b"", b"\xff\xfe"]  # and another entity's key, made in the test


async def _contents(url: str) -> tuple[str, str]:
    """The ticket rows and the notification entries, as text."""
    store = await open_wide_store(url)
    try:
        rows = [repr(r) async for r in store.scan("ticket")]
        entries = [json.dumps(entry_from_row(r).to_dict()) async for r in store.scan(NOTIFICATION_TABLE.name)]
        return "\n".join(rows), "\n".join(entries)
    finally:
        await store.close()


def test_records_under_a_stray_kafka_key_are_parked_at_key(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(17, 12)
    uid = uuid.uuid4().hex[:8]
    topics = {t: f"{uid}-{t}" for t in by_topic(history.events)}
    broker = f"kafka://{stack.kafka_bootstrap}"
    produced = publish(broker, by_topic(history.events), topics)
    created = next(e for e in history.events if e.type == "ticket.created")
    prefix = f"{created.payload['tenant']}/{created.payload['source']}"
    strays = [  # valid events of new tickets, each under a Kafka key that is not its ordering key
        dataclasses.replace(
            created,
            event_id=f"stray-{n}",
            ordering_key=f"{prefix}/stray-{n}",
            payload={**created.payload, "external_id": f"stray-{n}", "subject": f"STRAY SUBJECT {n}"},
        )
        for n in range(len(STRAY_KEYS) + 1)
    ]
    keys = [*STRAY_KEYS, f"{prefix}/someone-else".encode()]
    topic = topics[next(t for t, evs in by_topic(history.events).items() if created in evs)]
    asyncio.run(produce(broker, topic, [(k, e.to_json()) for k, e in zip(keys, strays, strict=True)]))
    url = sqlite_url(tmp_path / "wide.db")
    cfg = IngestConfig(
        app=SPEC, broker=broker, store_url=url, job=f"keys-{uid}", opts=WriteOptions(batch_size=50),
        dlq_root=str(tmp_path / "dlq"),
    )  # fmt: skip
    prepare_ingest(cfg)
    checkpoints = SqliteCheckpointStore(tmp_path / "jobs.db")
    try:
        run = ingest(spark, cfg, checkpoints, topics=sorted(topics.values()))
    finally:
        checkpoints.close_sync()
    stores = [r["store"] for r in run.reports.values()]
    assert sum(r["events"] for r in stores) == sum(produced.values()) + len(strays)
    assert sum(r["parked"] for r in stores) == len(strays)  # applied before the fix
    parked = [e.record for e in DeadLetterStore(tmp_path / "dlq").ordered()]
    assert sorted((p.stage, p.error_class) for p in parked) == [("key", "EventError")] * len(strays)
    assert all(f"ordering_key is '{prefix}/stray-" in p.error for p in parked)
    rows, entries = asyncio.run(_contents(url))
    assert rows and entries  # the valid events were applied and announced
    assert "STRAY" not in rows and "stray" not in entries
