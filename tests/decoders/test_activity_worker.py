"""A ``converge worker`` on the embedded stack consumes the activity platform in every source format
at once (Avro, JSON Schema, Protobuf with the registry stand-in, CloudEvents in both modes, CDC),
each a history of its own, delivered shuffled with duplicates, poison in between, then replayed
whole: the store converges to the oracle of every history, each poison record is parked with its
stage and class, and the worker stays up."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from examples.activity_platform.generator import generate_history
from framework.decoders import Record
from framework.decoders.registry_server import RegistryStandIn
from framework.dlq import DeadLetterStore
from framework.kafka_admin import ensure_topics, wait_all_drained
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_worker
from tests.decoders import activity_formats as af
from tests.decoders.activity_compare import expected_of, store_divergences, store_rows

pytestmark = pytest.mark.slow


async def _send(bootstrap: str, records: Sequence[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for r in records:
            await producer.send(r.topic, r.value, key=r.key, headers=list(r.headers) or None)
        await producer.flush()
    finally:
        await producer.stop()


def test_a_worker_reads_every_format_and_parks_each_formats_poison(stack: StackInfo, tmp_path: Path) -> None:
    rng = random.Random(47)
    with RegistryStandIn() as registry:
        ids = af.register(registry.url)
        histories = {
            fmt: generate_history(200 + i, n_events=60, n_orgs=2) for i, fmt in enumerate(af.FORMATS)
        }
        items = [r for fmt, h in histories.items() for r in af.records(h, fmt, ids)]
        poison = [p for fmt in af.FORMATS for p in af.poison_of(fmt, ids)]
        first = items + rng.sample(items, len(items) // 4)
        rng.shuffle(first)
        replay = list(items)
        rng.shuffle(replay)
        app_id = f"formats-{uuid.uuid4().hex[:8]}"
        broker = f"kafka://{stack.kafka_bootstrap}"
        store_url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
        topics = sorted({r.topic for r in items})
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 2)))
        asyncio.run(_send(stack.kafka_bootstrap, [*first, *(p for p, _ in poison), *replay]))
        env = {"CONVERGE_ES_URL": stack.es_url, "CONVERGE_ES_TOMBSTONES": "document",
               "CONVERGE_APP_ID": app_id, "CONVERGE_WIDE_STORE": store_url, "CONVERGE_PARTITIONS": "2",
               af.REGISTRY_ENV: registry.url}  # fmt: skip
        worker = start_worker(af.ALL_SPEC, tmp_path / "worker", broker, env)
        log = tmp_path / "worker" / "worker.log"
        try:
            assert asyncio.run(wait_all_drained(broker, app_id, topics, 240)), log.read_text()[-3000:]
            assert worker.poll() is None  # alive
        finally:
            code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]
    parked = list(DeadLetterStore(tmp_path / "worker" / "dlq").ordered())
    assert sorted((e.record.stage, e.record.error_class) for e in parked) == sorted(
        want for _, want in poison
    )
    hubs, logs = asyncio.run(store_rows(store_url))
    assert store_divergences([expected_of(h, fmt) for fmt, h in histories.items()], hubs, logs) == []
