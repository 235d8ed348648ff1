"""The backfill of an archive in the source's own format (raw records, format ``records``), decoded
by each agent's decoder as the stream decodes them, converges to the model: the support desk's CDC
topic, its ticket changes in every registry format and priorities in CloudEvents, and the activity
platform in every format (shuffled with duplicates, poison parked with its class, then replayed)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.generator import generate_history
from framework.decoders import Record, record_to_json
from spark_batch.archive import detect_format, write_records
from spark_batch.backfill import backfill
from tests.decoders import activity_formats as af
from tests.decoders import registry_app as ra
from tests.decoders.activity_compare import expected_of, store_divergences, store_rows
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


@pytest.fixture()
def registry_env(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A registry stand-in whose URL the driver and the executors read (``CONVERGE_TEST_REGISTRY``,
    shipped to the Python workers with ``SparkContext.environment``: a new URL starts new workers,
    which load the app afresh; the driver's apps are loaded afresh too). Each test registers its
    app's schemas in a fixed order on its own stand-in, so they get the same ids every run."""
    from framework.decoders.registry_server import RegistryStandIn
    from spark_batch import apps

    monkeypatch.setattr(apps, "_CACHE", {})
    with RegistryStandIn() as server:
        monkeypatch.setenv(af.REGISTRY_ENV, server.url)
        spark.sparkContext.environment[af.REGISTRY_ENV] = server.url
        try:
            yield server.url
        finally:
            spark.sparkContext.environment.pop(af.REGISTRY_ENV, None)


def _archive(tmp_path: Path, records: list[Record]) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    half = len(records) // 2
    write_records(records[:half], tmp_path / "a.records.jsonl.gz")
    write_records(records[half:], tmp_path / "b.records.jsonl")
    return [str(tmp_path / "a.records.jsonl.gz"), str(tmp_path / "b.records.jsonl")]


def _rejected(report: Any) -> Counter[str]:
    out: Counter[str] = Counter()
    for by_class in report.rejected.values():
        out.update(by_class)
    return out


def test_the_activity_platform_in_every_format_backfills_to_the_oracle(
    spark: SparkSession, tmp_path: Path, registry_env: str
) -> None:
    ids = af.register(registry_env)
    rng = random.Random(47)
    histories = {fmt: generate_history(300 + i, n_events=50, n_orgs=2) for i, fmt in enumerate(af.FORMATS)}
    items = [r for fmt, h in histories.items() for r in af.records(h, fmt, ids)]
    poison = [p for fmt in af.FORMATS for p in af.poison_of(fmt, ids)]
    records = items + rng.sample(items, len(items) // 4) + [p for p, _ in poison]
    rng.shuffle(records)
    paths = _archive(tmp_path, records)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    report = backfill(spark, paths, url, app=af.ALL_SPEC, partitions=2, dlq_root=tmp_path / "dlq")
    assert report.events == len(records)
    assert _rejected(report) == Counter(cls for _, (_, cls) in poison) and report.parked == len(poison)
    expected = [expected_of(h, fmt) for fmt, h in histories.items()]
    assert store_divergences(expected, *asyncio.run(store_rows(url))) == []
    rng.shuffle(items)
    again = backfill(spark, _archive(tmp_path / "replay", items), url, app=af.ALL_SPEC)  # a replay
    assert not again.rejected
    assert store_divergences(expected, *asyncio.run(store_rows(url))) == []


def test_the_support_desk_in_every_registry_format_and_cloudevents_backfills(
    spark: SparkSession, tmp_path: Path, registry_env: str
) -> None:
    ids = ra.register_all(registry_env)
    items: list[Record] = []
    truth: dict[str, dict[str, Any]] = {}
    for i, fmt in enumerate(ra.FORMATS):
        got, model = ra.history(fmt, ids, seed=10 + i)
        items += got
        truth.update(model)
    rng = random.Random(48)
    bad = ra.poison(ids)
    records = items + rng.sample(items, len(items) // 3) + [p for p, _ in bad]
    rng.shuffle(records)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    report = backfill(spark, _archive(tmp_path, records), url, app=ra.FORMATS_SPEC, dlq_root=tmp_path / "dlq")
    assert report.events == len(records)
    assert _rejected(report) == Counter(cls for _, (_, cls) in bad) and report.parked == len(bad)
    assert asyncio.run(store_table(url)) == truth


def test_the_cli_reads_an_archive_of_records_by_its_format_flag(spark: SparkSession, tmp_path: Path) -> None:
    """``converge spark backfill --format records``: an archive of raw records whose name does not
    say so is decoded (without the flag it is read as envelopes and rejected)."""
    from framework.cli import main

    h = history(7)
    write_records(h.records, tmp_path / "tickets.jsonl")
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    args = ["spark", "backfill", str(tmp_path / "tickets.jsonl"), "--app", SPEC, "--store", url, "--quiet"]
    assert main([*args, "--report", str(tmp_path / "auto.json")]) == 1
    assert json.loads((tmp_path / "auto.json").read_text())["applied"] == 0
    assert main([*args, "--format", "records", "--report", str(tmp_path / "records.json")]) == 0
    report = json.loads((tmp_path / "records.json").read_text())
    assert report["events"] == len(h.records) and report["rejected"] == {}
    assert asyncio.run(store_table(url)) == h.truth
