"""The join state's changelog on Kafka: one record per changed event record, per partition.

Sent through the worker's Faust producer (awaited: the broker has every
record before the event is acknowledged); read back with a plain aiokafka
consumer assigned to one partition, from the beginning to the end offset it
found on opening. The topic is ``<app>.<agent>.joins`` with the event topic's
partition count; a record's value is the key's current text, or empty for a
deleted key. Keep it compacted in production (only the last record of a key
matters).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["KafkaChangelog", "read_partition", "changelog_topic"]


def changelog_topic(app: str, agent: str) -> str:
    """The changelog topic of ``agent``'s join state."""
    return f"{app}.{agent}.joins"


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


async def read_partition(broker: str, topic: str, partition: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """Every record of one partition up to its end offset at the start, and that end offset."""
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.seek_to_beginning(tp)
        out: list[tuple[bytes, bytes]] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=500, max_records=10_000)
            out += [(r.key or b"", r.value or b"") for r in batch.get(tp, [])]
        return out, end
    finally:
        await consumer.stop()


class KafkaChangelog:
    """``processor.Changelog`` on a Faust topic (sending) and aiokafka (reading)."""

    def __init__(self, topic: Any, broker: str) -> None:
        self.topic = topic
        self.name: str = topic.get_topic_name()
        self.broker = broker

    async def send(self, partition: int, records: Sequence[tuple[str, str | None]]) -> int:
        futures = [
            await self.topic.send(key=k.encode(), value=(v or "").encode(), partition=partition)
            for k, v in records
        ]
        metas = await asyncio.gather(*futures)
        return max(m.offset for m in metas) + 1

    async def end(self, partition: int) -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(self.broker), enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(self.name, partition)
            return (await consumer.end_offsets([tp]))[tp]
        finally:
            await consumer.stop()

    async def read(self, partition: int) -> list[tuple[str, str | None]]:
        records, _ = await read_partition(self.broker, self.name, partition)
        return [(k.decode(), v.decode() or None) for k, v in records]
