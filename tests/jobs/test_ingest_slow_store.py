"""A store process slower than readers' ``settle`` no longer hides its batch's entries (issue 22, case 10).

The Spark ingestion job's processes run in this process (local Spark) over one batch of
the support desk app's topics on the embedded broker. The batch began a minute before its
``store`` process ended; meanwhile another writer recorded an entry and a consumer, once it was
``settle`` old, read and committed past it. The ``notifications`` process then writes the batch's
entries: the consumer must read them, with every row key the batch changed. Before the fix they
carried the batch's recorded start, behind the consumer's checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.support_desk.app import app as support_desk
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.core.events import parse_event
from framework.jobs.batches import Batch
from framework.jobs.kafka_ranges import partition_bounds, plan_ranges
from framework.local_stack import StackInfo
from framework.notifications import default_tenant_of
from framework.notifications.entries import changed_row
from framework.runtime.mapping import map_event
from spark_batch.ingest import prepare_ingest
from spark_batch.ingest_processes import IngestConfig, notification_process, store_process
from spark_batch.io import WriteOptions
from spark_batch.kafka_ranges import read_range
from tests.jobs.test_ingest import publish
from tests.jobs.test_ingest_late_notifications import SETTLE, _listed, _other_writer, _read_all
from tests.spark.support import sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = "examples.support_desk.app:app"


async def _changed(broker: str, batch: Batch) -> dict[tuple[str, str], set[str]]:
    """(tenant, table) -> the keys of the rows the batch's events write, mapped here by the app."""
    conf = support_desk.notifications
    rule = (conf.tenant_of if conf is not None else None) or default_tenant_of
    out: dict[tuple[str, str], set[str]] = {}
    for r in batch.input.ranges:
        async for page in read_range(broker, r):
            for _, _, _, _, value in page:
                event = parse_event(value)
                agent = support_desk.route(event)
                for m in map_event(agent, event, support_desk.views_of(agent)):
                    key, _ = changed_row(m)
                    tenant = rule(m.table, key)
                    cell = out.setdefault((str(tenant) if tenant is not None else "-", m.table), set())
                    cell.add(json.dumps(key, sort_keys=True, default=str))
    return out


def test_entries_of_a_store_process_slower_than_settle_reach_a_consumer_past_the_batch_start(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    history = generate_history(13, 20)
    uid = uuid.uuid4().hex[:8]
    topics = {t: f"{uid}-{t}" for t in by_topic(history.events)}
    broker = f"kafka://{stack.kafka_bootstrap}"
    publish(broker, by_topic(deliver(history.events, 13)), topics)
    url = sqlite_url(tmp_path / "wide.db")
    cfg = IngestConfig(
        app=SPEC, broker=broker, store_url=url, job=f"slow-{uid}", opts=WriteOptions(batch_size=50)
    )
    prepare_ingest(cfg)
    bounds = asyncio.run(partition_bounds(broker, sorted(topics.values())))
    began = int((time.time() - 60) * 1_000_000)  # the store process took a minute
    batch = Batch(1, plan_ranges(None, bounds, None), began)
    assert store_process(spark, cfg, batch)["applied"] > 0
    asyncio.run(_other_writer(url))
    time.sleep(SETTLE + 0.2)
    consumer = tmp_path / "consumer.db"
    assert [e.batch_id for e in asyncio.run(_read_all(url, consumer))] == ["other/1"]

    report = notification_process(spark, cfg, batch)
    time.sleep(SETTLE + 0.2)
    after = asyncio.run(_read_all(url, consumer))
    expected: dict[tuple[str, str], Any] = asyncio.run(_changed(stack.kafka_bootstrap, batch))
    assert expected and _listed(after, f"{cfg.job}/1") == expected  # nothing of it was read before the fix
    assert report["ingested_at"] > began + 60_000_000
