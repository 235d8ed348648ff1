"""The backfill of an archive in the source's own format: the CDC topic's raw records (format
``records``), decoded by the agent's decoder as the stream decodes them, converge to the model."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from framework.decoders import Record, record_to_json
from spark_batch.archive import detect_format, write_records
from spark_batch.backfill import backfill
from tests.decoders.support_cdc import SPEC, TOPIC_CDC, history, store_table

pytestmark = pytest.mark.slow


def test_a_cdc_archive_backfills_to_the_model_shuffled_and_replayed(
    spark: SparkSession, tmp_path: Path
) -> None:
    h = history(4)
    rng = random.Random(4)
    records = h.records + rng.sample(h.records, len(h.records) // 4)
    rng.shuffle(records)
    half = len(records) // 2
    write_records(records[:half], tmp_path / "a.records.jsonl.gz")
    no_position = json.dumps({"op": "c", "after": {"tenant": "t0"}, "source": {"ts_ms": 1}}).encode()
    poison = [
        record_to_json(Record(b'{"tenant":"t0","source":"s","external_id":"1"}', no_position, TOPIC_CDC)),
        record_to_json(Record(b"{}", b"{}", "nobody.reads.this")),
        b"not a record at all",
    ]
    with open(tmp_path / "b.records.jsonl", "wb") as f:
        f.write(b"\n".join([*(record_to_json(r) for r in records[half:]), *poison]) + b"\n")
    paths = [str(tmp_path / "a.records.jsonl.gz"), str(tmp_path / "b.records.jsonl")]
    assert detect_format(paths) == "records"
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    report = backfill(spark, paths, url, app=SPEC, partitions=2, dlq_root=tmp_path / "dlq")
    assert report.events == len(records) + len(poison)
    assert report.rejected == {"ticket-cdc": {"DecodeError": 1}, "-": {"EventError": 1, "DecodeError": 1}}
    assert report.parked == 3
    assert asyncio.run(store_table(url)) == h.truth
    again = backfill(spark, [str(tmp_path / "a.records.jsonl.gz")], url, app=SPEC, fmt="records")  # a replay
    assert not again.rejected
    assert asyncio.run(store_table(url)) == h.truth
