"""Reading a topic back from the embedded broker, for the replay tests."""

from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from framework.kafka_admin import end_offsets, ensure_topics


async def new_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    """A fresh topic with ``partitions`` partitions."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await ensure_topics(f"kafka://{bootstrap}", {topic: partitions})
    return topic


async def read_topic(bootstrap: str, topic: str, *, wait_s: float = 60.0) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the beginning up to its current end, partition by partition."""
    ends = await end_offsets(f"kafka://{bootstrap}", topic)
    want = sum(ends.values())
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(ends)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + wait_s
        while len(out) < want and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(msgs)
    finally:
        await consumer.stop()
    assert len(out) == want, f"read {len(out)} of {want} records of {topic}"
    return sorted(out, key=lambda m: (m.partition, m.offset))
