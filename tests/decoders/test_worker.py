"""A ``converge worker`` on the embedded stack consumes a CDC topic (shuffled across partitions
per key order kept, replayed, tombstones as null values) and a CloudEvents topic in binary mode
(attributes in headers), and, in a second test, ticket changes in every registry format and
priorities in CloudEvents: the store converges to the model, poison records are parked with their
stage and class, and the worker stays up."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from framework.decoders import Record
from framework.dlq import DeadLetterStore
from framework.kafka_admin import ensure_topics, wait_all_drained, wait_drained
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_worker
from tests.decoders.support_cdc import TOPIC_CDC, TOPIC_CE, history, store_table, worker_app

pytestmark = pytest.mark.slow


async def _send(bootstrap: str, records: list[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for r in records:
            await producer.send(r.topic, r.value, key=r.key, headers=list(r.headers) or None)
        await producer.flush()
    finally:
        await producer.stop()


def _ce(n: int, priority: str, time: str, key: bytes = b"ce/zendesk/1") -> Record:
    attrs = {
        "specversion": "1.0",
        "id": f"p{n}",
        "source": "/helpdesk",
        "type": "ticket.prioritized",
        "time": time,
    }
    headers = tuple((f"ce_{k}", v.encode()) for k, v in attrs.items())
    value = json.dumps({"priority": priority}).encode()
    return Record(key, value, TOPIC_CE, headers=(*headers, ("content-type", b"application/json")))


def test_a_worker_decodes_cdc_and_cloudevents_and_parks_poison(stack: StackInfo, tmp_path: Path) -> None:
    h = history(11)
    key = b'{"tenant": "t0", "source": "zendesk", "external_id": "100"}'
    no_position = json.dumps({"op": "u", "after": {}, "source": {"ts_ms": 1}}).encode()
    poison = [
        Record(key, b"{not json", TOPIC_CDC),
        Record(key, no_position, TOPIC_CDC),
        _ce(9, "low", "not a time"),
    ]
    # the live order of one key is kept per partition; the replay of the whole topic comes after it
    records = [*h.records, *poison, *h.records]
    ce = [
        _ce(1, "high", "2026-03-01T10:00:00Z"),
        _ce(2, "urgent", "2026-03-01T10:00:05Z"),
        _ce(3, "low", "2026-03-01T09:59:00Z"),
    ]  # fmt: skip (the last is older: it loses)
    app_id = f"decoded-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    store_url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    asyncio.run(ensure_topics(broker, {t: 2 for t in worker_app.topics()}))
    asyncio.run(_send(stack.kafka_bootstrap, [*records, *ce]))
    env = {"CONVERGE_ES_URL": stack.es_url, "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": app_id,
           "CONVERGE_WIDE_STORE": store_url, "CONVERGE_PARTITIONS": "2"}  # fmt: skip
    worker = start_worker("tests.decoders.support_cdc:worker_app", tmp_path / "worker", broker, env)
    log = tmp_path / "worker" / "worker.log"
    try:
        for topic in (TOPIC_CDC, TOPIC_CE):
            assert asyncio.run(wait_drained(broker, app_id, topic, 180)), log.read_text()[-3000:]
        assert worker.poll() is None  # alive
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]
    parked = list(DeadLetterStore(tmp_path / "worker" / "dlq").ordered())
    assert sorted((e.record.stage, e.record.error_class) for e in parked) == [("parse", "DecodeError")] * 3
    table = asyncio.run(store_table(store_url))
    priority = table.pop(next(t for t, row in table.items() if row["tenant"] == "ce"))
    assert priority["priority"] == "urgent"
    assert table == h.truth


def test_a_worker_reads_every_registry_format_and_cloudevents(stack: StackInfo, tmp_path: Path) -> None:
    """The support desk's ticket changes in Avro, JSON Schema and Protobuf and its priorities in
    CloudEvents (both modes), each a history shuffled with duplicates and replayed, poison in between:
    the store converges to the model, the poison is parked with stage and class, the worker stays up."""
    from framework.decoders.registry_server import RegistryStandIn
    from tests.decoders import registry_app as ra

    rng = random.Random(48)
    with RegistryStandIn() as registry:
        ids = ra.register_all(registry.url)
        items: list[Record] = []
        truth: dict[str, dict[str, object]] = {}
        for i, fmt in enumerate(ra.FORMATS):
            records, model = ra.history(fmt, ids, seed=i)
            items += records
            truth.update(model)
        bad = ra.poison(ids)
        first = items + rng.sample(items, len(items) // 3)
        rng.shuffle(first)
        app_id = f"formats-{uuid.uuid4().hex[:8]}"
        broker = f"kafka://{stack.kafka_bootstrap}"
        store_url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
        topics = sorted({r.topic for r in items})
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 2)))
        asyncio.run(
            _send(stack.kafka_bootstrap, [*first, *(p for p, _ in bad), *rng.sample(items, len(items))])
        )
        env = {"CONVERGE_ES_URL": stack.es_url, "CONVERGE_ES_TOMBSTONES": "document",
               "CONVERGE_APP_ID": app_id, "CONVERGE_WIDE_STORE": store_url, "CONVERGE_PARTITIONS": "2",
               ra.REGISTRY_ENV: registry.url}  # fmt: skip
        worker = start_worker(ra.FORMATS_SPEC, tmp_path / "worker", broker, env)
        log = tmp_path / "worker" / "worker.log"
        try:
            assert asyncio.run(wait_all_drained(broker, app_id, topics, 180)), log.read_text()[-3000:]
            assert worker.poll() is None  # alive
        finally:
            code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]
    parked = list(DeadLetterStore(tmp_path / "worker" / "dlq").ordered())
    assert sorted((e.record.stage, e.record.error_class) for e in parked) == sorted(want for _, want in bad)
    assert asyncio.run(store_table(store_url)) == truth
