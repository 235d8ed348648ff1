"""``spark ingest``'s store process decodes the records of a topic whose agent has a decoder (null
values too: a CDC tombstone is a record, not an empty message), as the stream does, with the
record's headers and timestamp (CloudEvents in binary mode). The executor function (``_store_task``)
runs here, in this process: on a stubbed range reader (no broker), and on the real range reader
against the embedded broker (both example apps, every format)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from examples.activity_platform.generator import generate_history
from framework.decoders import Record
from framework.decoders.registry_server import RegistryStandIn
from framework.jobs.batches import OffsetRange
from framework.jobs.kafka_ranges import partition_bounds
from framework.kafka_admin import ensure_topics
from framework.local_stack import LocalStack
from spark_batch import apps, ingest_processes
from spark_batch.backfill import prepare
from spark_batch.ingest_processes import IngestConfig, _store_task
from spark_batch.kafka_ranges import read_records_sync
from tests.decoders import activity_formats as af
from tests.decoders.activity_compare import expected_of, store_divergences, store_rows
from tests.decoders.support_cdc import SPEC, TOPIC_CDC, TOPIC_CE, history, store_table
from tests.decoders.test_worker import _ce


def test_the_store_process_decodes_cdc_records(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    h = history(5)
    records = list(h.records)
    random.Random(5).shuffle(records)  # another partitioning: the order within a key is not kept either

    def read(broker: str, r: OffsetRange) -> Iterator[Record]:
        yield from records[r.start : r.end]

    monkeypatch.setattr(ingest_processes, "read_records_sync", read)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    prepare(SPEC, url)
    cfg = IngestConfig(app=SPEC, broker="unused:9092", store_url=url, job="cdc")
    out = list(_store_task(cfg, [OffsetRange(TOPIC_CDC, 0, 0, len(records))]))
    stats = {r[1]: r[2] for r in out if r[0] == "stat"}
    assert stats[("events",)] == len(records) and not [r for r in out if r[0] == "parked"]
    assert asyncio.run(store_table(url)) == h.truth


async def _produce(bootstrap: str, records: Sequence[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for r in records:
            await producer.send(r.topic, r.value, key=r.key, partition=0, headers=list(r.headers) or None)
        await producer.flush()
    finally:
        await producer.stop()


def _ranges(
    broker: str, topics: Sequence[str], before: dict[tuple[str, int], tuple[int, int]]
) -> list[OffsetRange]:
    """The ranges each topic's partition 0 grew by since ``before``."""
    after = asyncio.run(partition_bounds(broker, topics))
    return [OffsetRange(t, 0, before[(t, 0)][1], after[(t, 0)][1]) for t in topics]


def _ingest(spec: str, url: str, broker: str, ranges: list[OffsetRange]) -> list[tuple[Any, ...]]:
    prepare(spec, url)
    return list(_store_task(IngestConfig(app=spec, broker=broker, store_url=url, job="decoded"), ranges))


@pytest.mark.slow
def test_the_range_reader_gives_headers_and_timestamps(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """The support desk's CDC topic and a CloudEvents topic in binary mode (attributes in headers)
    through the store process on the real range reader; poison parked at ``parse``. A broker of its
    own: the worker tests read these topics whole."""
    stack = fresh_stack.info
    assert stack is not None
    h = history(6)
    broker = f"kafka://{stack.kafka_bootstrap}"
    topics = [TOPIC_CDC, TOPIC_CE]
    asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 1)))
    before = asyncio.run(partition_bounds(broker, topics))
    ce = [_ce(1, "high", "2026-03-01T10:00:00Z"), _ce(2, "urgent", "2026-03-01T10:00:05Z"),
          _ce(3, "low", "2026-03-01T09:59:00Z"), _ce(4, "low", "not a time")]  # fmt: skip
    asyncio.run(_produce(stack.kafka_bootstrap, [*h.records, *ce]))
    ranges = _ranges(broker, topics, before)
    [ce_range] = [r for r in ranges if r.topic == TOPIC_CE]
    read = list(read_records_sync(broker, ce_range))
    assert [dict(r.headers)["ce_id"] for r in read] == [b"p1", b"p2", b"p3", b"p4"]
    assert all(r.timestamp is not None and r.timestamp > 1_700_000_000_000 for r in read)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    out = _ingest("tests.decoders.support_cdc:worker_app", url, broker, ranges)
    assert [r[1:4] for r in out if r[0] == "parked"] == [("ticket-priority", "parse", "DecodeError")]
    table = asyncio.run(store_table(url))
    priority = table.pop(next(t for t, row in table.items() if row["tenant"] == "ce"))
    assert priority["priority"] == "urgent"
    assert table == h.truth


@pytest.mark.slow
def test_the_activity_platform_in_every_format_ingests(
    fresh_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = fresh_stack.info
    assert stack is not None
    broker = f"kafka://{stack.kafka_bootstrap}"
    monkeypatch.setattr(apps, "_CACHE", {})  # the app is built with this test's registry
    with RegistryStandIn() as registry:
        ids = af.register(registry.url)
        monkeypatch.setenv(af.REGISTRY_ENV, registry.url)
        app = af.all_formats()
        topics = sorted(a.topic for a in app.agents)
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 1)))
        before = asyncio.run(partition_bounds(broker, topics))
        histories = {
            fmt: generate_history(100 + i, n_events=40, n_orgs=2) for i, fmt in enumerate(af.FORMATS)
        }
        items = [r for fmt, h in histories.items() for r in af.records(h, fmt, ids)]
        asyncio.run(_produce(stack.kafka_bootstrap, items))
        url = f"sqlite:///{tmp_path / 'wide.db'}"
        out = _ingest(af.ALL_SPEC, url, broker, _ranges(broker, topics, before))
    assert not [r for r in out if r[0] == "parked"]
    stats = {r[1]: r[2] for r in out if r[0] == "stat"}
    assert stats[("events",)] == len(items)
    hubs, logs = asyncio.run(store_rows(url))
    assert store_divergences([expected_of(h, fmt) for fmt, h in histories.items()], hubs, logs) == []


@pytest.mark.slow
def test_the_support_desk_in_every_registry_format_ingests(
    fresh_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.decoders import registry_app as ra

    stack = fresh_stack.info
    assert stack is not None
    broker = f"kafka://{stack.kafka_bootstrap}"
    monkeypatch.setattr(apps, "_CACHE", {})  # the app is built with this test's registry
    with RegistryStandIn() as registry:
        ids = ra.register_all(registry.url)
        monkeypatch.setenv(ra.REGISTRY_ENV, registry.url)
        items: list[Record] = []
        truth: dict[str, dict[str, Any]] = {}
        for i, fmt in enumerate(ra.FORMATS):
            got, model = ra.history(fmt, ids, seed=20 + i)
            items += got
            truth.update(model)
        bad = ra.poison(ids)
        topics = sorted({r.topic for r in items})
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 1)))
        before = asyncio.run(partition_bounds(broker, topics))
        asyncio.run(_produce(stack.kafka_bootstrap, [*items, *(p for p, _ in bad), *items]))
        url = f"sqlite:///{tmp_path / 'wide.db'}"
        out = _ingest(ra.FORMATS_SPEC, url, broker, _ranges(broker, topics, before))
    assert sorted(tuple(r[2:4]) for r in out if r[0] == "parked") == sorted(want for _, want in bad)
    assert asyncio.run(store_table(url)) == truth
