"""``converge spark ingest`` parks and counts a record whose value is null (issue 42, item 6), as the
worker does (``parse_work``: stage ``parse``, ``EventError``, the record's key, no value), and a
record whose value is not UTF-8 at stage ``parse`` too (its exact bytes kept; before, parking it
raised: the WAL writer encoded the bytes again). Local Spark in
this process, the support desk app on the embedded broker, real SQLite stores."""

from __future__ import annotations

import asyncio
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
from spark_batch.ingest import ingest, prepare_ingest
from spark_batch.ingest_processes import IngestConfig
from spark_batch.io import WriteOptions
from tests.jobs.test_ingest import publish
from tests.spark.support import sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = "examples.support_desk.app:app"
NULL_KEYS = [b"acme/freshdesk/gone-1", b"acme/freshdesk/gone-2", None]
NOT_UTF8 = b"\xff\xfe not text"


def test_null_and_undecodable_values_are_parked_at_parse_and_counted(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(23, 10)
    uid = uuid.uuid4().hex[:8]
    topics = {t: f"{uid}-{t}" for t in by_topic(history.events)}
    broker = f"kafka://{stack.kafka_bootstrap}"
    produced = publish(broker, by_topic(history.events), topics)
    topic = sorted(topics.values())[0]
    bad = [*((k, None) for k in NULL_KEYS), (b"acme/freshdesk/x", NOT_UTF8)]
    asyncio.run(produce(broker, topic, bad))  # type: ignore[arg-type]
    url = sqlite_url(tmp_path / "wide.db")
    cfg = IngestConfig(
        app=SPEC, broker=broker, store_url=url, job=f"nulls-{uid}", opts=WriteOptions(batch_size=50),
        dlq_root=str(tmp_path / "dlq"),
    )  # fmt: skip
    prepare_ingest(cfg)
    checkpoints = SqliteCheckpointStore(tmp_path / "jobs.db")
    try:
        run = ingest(spark, cfg, checkpoints, topics=sorted(topics.values()))
    finally:
        checkpoints.close_sync()
    stores = [r["store"] for r in run.reports.values()]
    # the model: every record read is counted; each bad one is parked, the rest applied
    assert sum(r["events"] for r in stores) == sum(produced.values()) + len(bad)
    assert sum(r["parked"] for r in stores) == len(bad)
    assert sum(r["applied"] for r in stores) == sum(produced.values())
    rejected: dict[str, int] = {}
    for r in stores:
        for k, n in r["rejected"].items():
            rejected[k] = rejected.get(k, 0) + n
    assert sum(rejected.values()) == len(bad)
    records = [e.record for e in DeadLetterStore(tmp_path / "dlq").ordered()]
    parked = sorted(((p.stage, p.error_class, p.key, p.value) for p in records), key=repr)
    expected = sorted(
        [*(("parse", "EventError", k, None) for k in NULL_KEYS),
         ("parse", "EventError", None, NOT_UTF8)],  # its exact bytes; no event, so no key
        key=repr,
    )  # fmt: skip
    assert parked == expected
