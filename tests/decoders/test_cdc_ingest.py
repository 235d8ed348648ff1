"""``spark ingest``'s store process decodes the records of a topic whose agent has a decoder (null
values too: a CDC tombstone is a record, not an empty message), as the stream does. The executor
function runs here on a stubbed range reader: no broker, no Spark."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.jobs.batches import OffsetRange
from spark_batch import ingest_processes
from spark_batch.backfill import prepare
from spark_batch.ingest_processes import IngestConfig, _store_task
from tests.decoders.support_cdc import SPEC, TOPIC_CDC, history, store_table


def test_the_store_process_decodes_cdc_records(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    h = history(5)
    records = list(h.records)
    random.Random(5).shuffle(records)  # another partitioning: the order within a key is not kept either

    def read(broker: str, r: OffsetRange) -> Iterator[tuple[Any, ...]]:
        for i, rec in enumerate(records[r.start : r.end]):
            yield (rec.topic, r.partition, r.start + i, rec.key, rec.value)

    monkeypatch.setattr(ingest_processes, "read_range_sync", read)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    prepare(SPEC, url)
    cfg = IngestConfig(app=SPEC, broker="unused:9092", store_url=url, job="cdc")
    out = list(_store_task(cfg, [OffsetRange(TOPIC_CDC, 0, 0, len(records))]))
    stats = {r[1]: r[2] for r in out if r[0] == "stat"}
    assert stats[("events",)] == len(records) and not [r for r in out if r[0] == "parked"]
    assert asyncio.run(store_table(url)) == h.truth
