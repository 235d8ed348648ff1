"""The verifier end to end on noida-db Kafka: two consumers, one losing a known set of messages.

``search`` processes everything. ``timeline`` loses m02 and m08 on their first
delivery only, and m04 on every delivery. The verifier must retry exactly
the lost messages, recover m02 and m08, give up m04 after ``max_retries``,
move the checkpoint only past complete buckets, and change nothing when run
twice in a row. Runs once with SQLite checkpoints and once with ZooKeeper's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.coordination.zookeeper import ZooKeeperCheckpointStore
from framework.delivery.acks import DeliveryAckSink
from framework.delivery.kafka_io import RecordFetcher, RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack
from framework.delivery.producer import TrackedProducer
from framework.delivery.queries import failed_messages
from framework.delivery.report import build_report
from framework.delivery.verifier import Verifier, VerifierConfig, VerifyResult
from framework.dlq import DeadLetterWAL
from framework.kafka_admin import end_offsets, ensure_topics
from framework.local_stack import StackInfo
from tests.delivery.conftest import MIN, T0, Clock, snapshot
from tests.delivery.kafka_consumers import AckingConsumer, event_bytes

RECOVERS = {"m02", "m08"}
NEVER = {"m04"}
B = 10 * MIN


def bucket(k: int) -> int:
    """Start of the k-th 10-minute bucket after T0, in microseconds."""
    return int((T0 + k * B) * 1_000_000)


@dataclass
class Rig:
    clock: Clock
    ledger: DeliveryLedger
    verifier: Verifier
    consumers: list[AckingConsumer]
    topic: str
    broker: str
    failed: DeadLetterWAL

    async def run(self) -> VerifyResult:
        return await self.verifier.run_once()

    async def drain(self) -> None:
        for c in self.consumers:
            await c.drain()

    async def ends(self) -> dict[int, int]:
        return await end_offsets(self.broker, self.topic)


@pytest.fixture(params=["sqlite", "zookeeper"])
async def checkpoints(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CheckpointStore]:
    if request.param == "sqlite":
        store: CheckpointStore = SqliteCheckpointStore(tmp_path / "cp.db")
    else:
        zk = request.getfixturevalue("zookeeper_server")
        store = ZooKeeperCheckpointStore(zk.hosts, root=f"/verifier-{uuid.uuid4().hex[:8]}")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture()
async def rig(
    stack: StackInfo, ledger: DeliveryLedger, clock: Clock, checkpoints: CheckpointStore, tmp_path: Path
) -> AsyncIterator[Rig]:
    broker = stack.kafka_bootstrap
    topic = f"deliv-{uuid.uuid4().hex[:8]}"
    await ensure_topics(broker, {topic: 2})
    publisher, fetcher = RecordPublisher(broker), RecordFetcher(broker)
    failed = DeadLetterWAL(tmp_path / "dlq")
    verifier = Verifier(
        ledger,
        checkpoints,
        publisher,
        fetcher=fetcher,
        dlq=failed,
        config=VerifierConfig(grace_seconds=600, max_retries=2, lookback_seconds=3600),
        clock=clock,
    )
    consumers = [
        AckingConsumer(broker, topic, DeliveryAckSink(ledger, "search"), lambda mid, n: False),
        AckingConsumer(
            broker,
            topic,
            DeliveryAckSink(ledger, "timeline"),
            lambda mid, n: mid in NEVER or (mid in RECOVERS and n == 0),
        ),
    ]
    for c in consumers:
        await c.start()
    try:
        yield Rig(clock, ledger, verifier, consumers, topic, broker, failed)
    finally:
        for c in consumers:
            await c.stop()
        await fetcher.close()
        await publisher.close()
        failed.close()


async def _records_after(broker: str, topic: str, start: dict[int, int]) -> list[tuple[bytes, bytes, dict]]:
    """Records appended to ``topic`` since the offsets ``start``."""
    ends = await end_offsets(broker, topic)
    c = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
    await c.start()
    out = []
    try:
        for p, end in ends.items():
            tp = TopicPartition(topic, p)
            c.assign([tp])
            c.seek(tp, start.get(p, 0))
            while await c.position(tp) < end:
                for r in (await c.getmany(tp, timeout_ms=500)).get(tp, []):
                    out.append((r.key, r.value, dict(r.headers or ())))
    finally:
        await c.stop()
    return out


async def _assert_second_run_is_harmless(rig: Rig) -> None:
    before, ends = await snapshot(rig.ledger), await rig.ends()
    cp = await rig.verifier.checkpoint()
    again = await rig.run()
    assert (again.retried, again.given_up, again.errors) == ([], [], [])
    assert await snapshot(rig.ledger) == before
    assert await rig.ends() == ends
    assert await rig.verifier.checkpoint() == cp


async def test_verifier_retries_exactly_the_lost_messages_and_checkpoints_complete_buckets(rig: Rig) -> None:
    producer = TrackedProducer(rig.ledger, rig.verifier.publisher)
    originals: dict[str, tuple[bytes, bytes]] = {}
    for n in range(12):
        rig.clock.now = T0 + (n // 6) * B + (n % 6 + 1) * MIN  # m00..m05 in bucket 0, m06..m11 in bucket 1
        mid = f"m{n:02d}"
        key, value = f"org:{n % 3}".encode(), event_bytes(mid, n)
        originals[mid] = (key, value)
        await producer.send(rig.topic, key, value, message_id=mid, source="exchange" if n % 2 else "google")
    await rig.drain()

    # Bucket 0 is complete (ended 15 minutes ago, grace 10); bucket 1 is not.
    rig.clock.now = T0 + 25 * MIN
    ends = await rig.ends()
    r1 = await rig.run()
    assert sorted(r1.retried) == [("m02", 1), ("m04", 1)]
    assert r1.given_up == [] and r1.errors == []
    assert r1.checkpoint_after == bucket(-1)  # the empty buckets before bucket 0, not bucket 0 itself
    republished = await _records_after(rig.broker, rig.topic, ends)
    assert sorted((v, h[b"converge-delivery-retry".decode()]) for _, v, h in republished) == sorted(
        (originals[m][1], b"1") for m in ("m02", "m04")
    )
    assert {k for k, _, _ in republished} == {originals["m02"][0], originals["m04"][0]}
    retry_rows = await rig.ledger.bucket(bucket(2))
    assert sorted((e.ref.message_id, e.retry, e.origin_bucket) for e in retry_rows) == [
        ("m02", 1, bucket(0)),
        ("m04", 1, bucket(0)),
    ]
    await _assert_second_run_is_harmless(rig)

    await rig.drain()  # timeline now processes m02's retry, and loses m04 again
    rig.clock.now = T0 + 35 * MIN
    r2 = await rig.run()
    assert r2.retried == [("m08", 1)] and r2.checkpoint_after == bucket(-1)
    await rig.drain()

    rig.clock.now = T0 + 45 * MIN  # bucket 2 (retries of m02, m04) is complete now
    r3 = await rig.run()
    assert r3.retried == [("m04", 2)] and r3.given_up == []
    assert r3.checkpoint_after == bucket(-1)  # bucket 0 still waits for m04
    await rig.drain()

    rig.clock.now = T0 + 65 * MIN  # bucket 4 (m04's second retry) is complete: retries exhausted
    r4 = await rig.run()
    assert r4.retried == [] and r4.given_up == [("m04", "failed_despite_retries")]
    assert r4.checkpoint_after == bucket(4)  # buckets 0 and 2 waited on m04, given up later in this run
    await _assert_second_run_is_harmless(rig)

    timeline = rig.consumers[1].seen
    assert sorted(x for x in timeline if x[1] > 0) == [("m02", 1), ("m04", 1), ("m04", 2), ("m08", 1)]

    (parked,) = [e.record for e in rig.failed.iterate()]
    assert (parked.error_class, parked.stage, parked.value) == (
        "failed_despite_retries",
        "delivery",
        originals["m04"][1],
    )
    assert "timeline" in parked.error and parked.topic == rig.topic

    failed = await failed_messages(rig.ledger, since=bucket(0), until=bucket(6))
    assert [(m.entry.ref.message_id, m.status, m.missing) for m in failed] == [
        ("m04", "failed_despite_retries", ("timeline",))
    ]
    assert await failed_messages(rig.ledger, consumer="search", since=bucket(0), until=bucket(6)) == []

    report = await build_report(rig.ledger, since=bucket(0), until=bucket(6))
    b0, b1 = report.buckets[bucket(0)], report.buckets[bucket(1)]
    assert (b0.messages, b0.delivered_first_time, b0.failed_initially, b0.recovered_by_retry,
            b0.failed_despite_retries) == (6, 4, 2, 1, 1)  # fmt: skip
    assert (b1.messages, b1.delivered_first_time, b1.failed_initially, b1.recovered_by_retry,
            b1.failed_despite_retries) == (6, 5, 1, 1, 0)  # fmt: skip
    t = report.total
    assert (t.messages, t.delivered_first_time, t.failed_initially, t.recovered_by_retry,
            t.failed_despite_retries, t.retrying, t.unverified) == (12, 9, 3, 2, 1, 0, 0)  # fmt: skip
    assert list(report.buckets) == [bucket(0), bucket(1)]


async def test_rival_verifiers_share_a_checkpoint_without_regressing_it(
    rig: Rig, checkpoints: CheckpointStore, tmp_path: Path
) -> None:
    """Two verifiers (e.g. two workers' timers) race over one ledger and one checkpoint."""
    producer = TrackedProducer(rig.ledger, rig.verifier.publisher)
    for n in range(4):
        rig.clock.now = T0 + (n + 1) * MIN
        await producer.send(rig.topic, b"k", event_bytes(f"r{n}", n), message_id=f"r{n}", source="s")
    for n in (0, 1):
        for consumer in ("search", "timeline"):
            await rig.ledger.ack(f"r{n}", consumer)
    if isinstance(checkpoints, ZooKeeperCheckpointStore):
        rival_cp: CheckpointStore = ZooKeeperCheckpointStore(checkpoints.hosts, root=checkpoints.root)
    else:
        rival_cp = SqliteCheckpointStore(checkpoints.path)  # type: ignore[attr-defined]
    v = rig.verifier
    rival = Verifier(rig.ledger, rival_cp, v.publisher, fetcher=v.fetcher, clock=rig.clock, config=v.config)
    try:
        rig.clock.now = T0 + 25 * MIN
        results = await asyncio.gather(rig.run(), rival.run_once())
        assert all(r.errors == [] for r in results)
        assert {mid for r in results for mid, _ in r.retried} == {"r2", "r3"}
        retry_rows = await rig.ledger.bucket(bucket(2))
        assert sorted((e.ref.message_id, e.retry) for e in retry_rows) == [("r2", 1), ("r3", 1)]
        assert (await rig.verifier.checkpoint()).value == str(bucket(-1))  # type: ignore[union-attr]
        rig.clock.now = T0 + 45 * MIN
        for consumer in ("search", "timeline"):
            await rig.ledger.ack_many([Ack("r2", consumer), Ack("r3", consumer)])
        results = await asyncio.gather(rig.run(), rival.run_once())
        assert all(r.retried == [] and r.errors == [] for r in results)
        assert (await rig.verifier.checkpoint()).value == str(bucket(2))  # type: ignore[union-attr]
    finally:
        await rival_cp.close()
