"""Events the topic no longer holds: the re-fetch callback, unretrievable messages, transient failures."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.records_to_delete import RecordsToDelete

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.delivery.kafka_io import Record, RecordFetcher, RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerEntry, Location
from framework.delivery.producer import TrackedProducer
from framework.delivery.queries import failed_messages
from framework.delivery.verifier import Refetched, Verifier, VerifierConfig
from framework.dlq import DeadLetterWAL
from framework.kafka_admin import end_offsets, ensure_topics
from framework.local_stack import StackInfo
from tests.delivery.conftest import MIN, T0, Clock
from tests.delivery.kafka_consumers import event_bytes


@pytest.fixture()
async def kafka(stack: StackInfo) -> AsyncIterator[tuple[str, str, RecordPublisher, RecordFetcher]]:
    topic = f"refetch-{uuid.uuid4().hex[:8]}"
    await ensure_topics(stack.kafka_bootstrap, {topic: 1})
    publisher, fetcher = (
        RecordPublisher(stack.kafka_bootstrap),
        RecordFetcher(stack.kafka_bootstrap, timeout=5),
    )
    try:
        yield stack.kafka_bootstrap, topic, publisher, fetcher
    finally:
        await fetcher.close()
        await publisher.close()


async def _expire(broker: str, topic: str, before: int) -> None:
    """Delete the topic's records before offset ``before`` (as retention would)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(before_offset=before)})
    finally:
        await admin.close()


async def test_fetcher_reads_back_by_offset_and_reports_gone_records(kafka: tuple) -> None:
    broker, topic, publisher, fetcher = kafka
    locs = [await publisher.publish(topic, b"k", b"v%d" % i, [("h", b"1")]) for i in range(3)]
    assert await fetcher.fetch(locs[1]) == Record(b"k", b"v1", (("h", b"1"),))
    await _expire(broker, topic, 2)
    assert await fetcher.fetch(locs[1]) is None
    assert await fetcher.fetch(locs[2]) == Record(b"k", b"v2", (("h", b"1"),))
    assert await fetcher.fetch(Location(topic, 0, 99)) is None
    assert await fetcher.fetch(Location(topic, 7, 0)) is None
    assert await fetcher.fetch(Location(f"missing-{uuid.uuid4().hex[:6]}", 0, 0)) is None


async def test_expired_topic_data_goes_through_the_refetch_callback(
    kafka: tuple, ledger: DeliveryLedger, clock: Clock, tmp_path: Path
) -> None:
    broker, topic, publisher, fetcher = kafka
    source_system = {f"m{n}": event_bytes(f"m{n}", n) for n in range(4)}
    clock.now = T0 + MIN
    producer = TrackedProducer(ledger, publisher)
    for mid in ("m0", "m1"):
        await producer.send(topic, mid.encode(), source_system[mid], message_id=mid, source="exchange")
    await ledger.register("m2", "exchange")  # registered, then the crawler crashed before publishing
    await producer.send(topic, b"m3", source_system["m3"], message_id="m3", source="exchange")
    await ledger.ack("m3", "search")
    await ledger.ack("m3", "timeline")
    await _expire(broker, topic, 1)  # m0's record is gone; m1 and m3 remain

    asked: list[str] = []

    async def refetch(entry: LedgerEntry) -> Refetched | None:
        asked.append(entry.ref.message_id)
        return Refetched(topic, entry.ref.message_id.encode(), source_system[entry.ref.message_id])

    checkpoints = SqliteCheckpointStore(tmp_path / "cp.db")
    verifier = Verifier(ledger, checkpoints, publisher, fetcher=fetcher, refetch=refetch, clock=clock,
                        config=VerifierConfig(lookback_seconds=1800))  # fmt: skip
    clock.now = T0 + 25 * MIN
    start = await end_offsets(broker, topic)
    result = await verifier.run_once()
    assert sorted(asked) == ["m0", "m2"]  # m1 still in the topic; m3 delivered
    assert sorted(result.retried) == [("m0", 1), ("m1", 1), ("m2", 1)]
    end = (await end_offsets(broker, topic))[0]
    assert end == start[0] + 3
    again = [await fetcher.fetch(Location(topic, 0, off)) for off in range(start[0], end)]
    assert sorted(r.value for r in again if r) == sorted(source_system[m] for m in ("m0", "m1", "m2"))
    assert all(dict(r.headers)["converge-delivery-retry"] == b"1" for r in again if r)
    await checkpoints.close()


async def test_gone_for_good_is_given_up_as_unretrievable(
    kafka: tuple, ledger: DeliveryLedger, clock: Clock, tmp_path: Path
) -> None:
    broker, topic, publisher, fetcher = kafka
    clock.now = T0 + MIN
    await TrackedProducer(ledger, publisher).send(
        topic, b"k", event_bytes("gone", 1), message_id="gone", source="s"
    )
    await ledger.register("never-published", "s")
    await _expire(broker, topic, 1)

    async def nothing(entry: LedgerEntry) -> Refetched | None:
        return None

    failed = DeadLetterWAL(tmp_path / "dlq")
    checkpoints = SqliteCheckpointStore(tmp_path / "cp.db")
    config = VerifierConfig(lookback_seconds=1800)
    with_callback = Verifier(ledger, checkpoints, publisher, fetcher=fetcher, refetch=nothing, dlq=failed,
                             clock=clock, config=config)  # fmt: skip
    clock.now = T0 + 25 * MIN
    result = await with_callback.run_once()
    assert sorted(result.given_up) == [("gone", "unretrievable"), ("never-published", "unretrievable")]
    assert result.retried == [] and result.checkpoint_after == int(T0 * 1e6)

    clock.now = T0 + 11 * MIN
    await ledger.register("no-callback", "s")
    without_callback = Verifier(ledger, checkpoints, publisher, fetcher=fetcher, dlq=failed, clock=clock,
                                config=config)  # fmt: skip
    clock.now = T0 + 35 * MIN
    result = await without_callback.run_once()
    assert result.given_up == [("no-callback", "unretrievable")]
    assert result.checkpoint_after == int((T0 + 10 * MIN) * 1e6)
    parked = sorted((p.error_class, p.offset, p.value) for p in [e.record for e in failed.iterate()])
    assert parked == [("unretrievable", -1, None), ("unretrievable", -1, None), ("unretrievable", 0, None)]
    statuses = {m.entry.ref.message_id: (m.status, m.entry.gave_up) for m in await failed_messages(ledger)}
    assert statuses == {
        "gone": ("failed_despite_retries", "unretrievable"),
        "never-published": ("failed_despite_retries", "unretrievable"),
        "no-callback": ("failed_despite_retries", "unretrievable"),
    }
    failed.close()
    await checkpoints.close()


async def test_a_failing_callback_leaves_the_bucket_open_for_the_next_run(
    kafka: tuple, ledger: DeliveryLedger, clock: Clock, tmp_path: Path
) -> None:
    broker, topic, publisher, fetcher = kafka
    clock.now = T0 + MIN
    await ledger.register("m1", "s")
    calls = 0

    async def flaky(entry: LedgerEntry) -> Refetched | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("source system down")
        return Refetched(topic, b"k", event_bytes("m1", 1))

    checkpoints = SqliteCheckpointStore(tmp_path / "cp.db")
    verifier = Verifier(ledger, checkpoints, publisher, fetcher=fetcher, refetch=flaky, clock=clock,
                        config=VerifierConfig(lookback_seconds=1800))  # fmt: skip
    clock.now = T0 + 25 * MIN
    first = await verifier.run_once()
    assert first.errors == [("m1", "ConnectionError: source system down")] and first.retried == []
    assert first.checkpoint_after == int((T0 - 10 * MIN) * 1e6)
    second = await verifier.run_once()
    assert second.retried == [("m1", 1)] and second.errors == []
    await checkpoints.close()
