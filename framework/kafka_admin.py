"""Small Kafka helpers for the demo, tests and jobs: topics, producing, group progress."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

__all__ = ["ensure_topics", "produce", "end_offsets", "committed_offsets", "wait_drained"]


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


async def ensure_topics(broker: str, topics: Mapping[str, int]) -> None:
    """Create each topic with its partition count when missing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(broker))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            try:
                await admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()


async def produce(broker: str, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> int:
    """Send keyed records and wait until the broker has them all; returns the count."""
    producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(broker), linger_ms=5, acks="all")
    await producer.start()
    n = 0
    try:
        batch = []
        for key, value in records:
            batch.append(await producer.send(topic, key=key, value=value))
            n += 1
            if len(batch) >= 1000:
                await asyncio.gather(*batch)
                batch.clear()
        await asyncio.gather(*batch)
    finally:
        await producer.stop()
    return n


async def end_offsets(broker: str, topic: str) -> dict[int, int]:
    """The log-end offset of every partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), enable_auto_commit=False)
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        await consumer.stop()


async def committed_offsets(broker: str, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The group's committed offset per partition (-1 when none)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=_bootstrap(broker), group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        out = {}
        for p in partitions:
            c = await consumer.committed(TopicPartition(topic, p))
            out[p] = -1 if c is None else c
        return out
    finally:
        await consumer.stop()


async def wait_drained(broker: str, group: str, topic: str, timeout: float, poll: float = 0.5) -> bool:
    """Wait until ``group`` has committed the end of every partition of ``topic`` (an empty
    partition, which a group never commits, counts as drained)."""
    deadline = time.monotonic() + timeout
    ends = await end_offsets(broker, topic)
    while time.monotonic() < deadline:
        committed = await committed_offsets(broker, group, topic, ends)
        if all(committed[p] >= ends[p] or ends[p] == 0 for p in ends):
            return True
        await asyncio.sleep(poll)
    return False
