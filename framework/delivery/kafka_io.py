"""Kafka access for delivery verification: read one record back by offset, publish one record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from framework.core.errors import Transient
from framework.delivery.model import Location

__all__ = ["Record", "RecordFetcher", "RecordPublisher", "FetchTimeout"]


class FetchTimeout(Transient):
    """The record exists but did not arrive in time (transient)."""


@dataclass(frozen=True)
class Record:
    """A Kafka record's key, value and headers."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


class RecordFetcher:
    """Reads single records by (topic, partition, offset); a consumer without a group, started lazily."""

    def __init__(self, broker: str, *, timeout: float = 10.0) -> None:
        self.broker = broker
        self.timeout = timeout
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=_bootstrap(self.broker),
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def _partitions(self, consumer: AIOKafkaConsumer, topic: str) -> set[int]:
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
            parts = consumer.partitions_for_topic(topic)
        return set(parts or ())

    async def fetch(self, location: Location) -> Record | None:
        """The record at ``location``; None when the topic no longer holds it (deleted, expired, compacted).

        Raises FetchTimeout when the record should exist but did not arrive in time.
        """
        async with self._lock:
            consumer = await self._started()
            if location.partition not in await self._partitions(consumer, location.topic):
                return None
            tp = TopicPartition(location.topic, location.partition)
            first = (await consumer.beginning_offsets([tp]))[tp]
            end = (await consumer.end_offsets([tp]))[tp]
            if not first <= location.offset < end:
                return None
            consumer.assign([tp])
            consumer.seek(tp, location.offset)
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500, max_records=1)
                for msg in batch.get(tp, []):
                    if msg.offset != location.offset:
                        return None
                    headers = tuple((k, bytes(v)) for k, v in (msg.headers or ()))
                    return Record(msg.key, msg.value, headers)
            raise FetchTimeout(f"{location.topic}[{location.partition}]@{location.offset}: no record in time")

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()


class RecordPublisher:
    """Publishes records and waits for the broker's acknowledgement (acks=all); started lazily."""

    def __init__(self, broker: str) -> None:
        self.broker = broker
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()

    async def _started(self) -> AIOKafkaProducer:
        async with self._lock:
            if self._producer is None:
                producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(self.broker), acks="all")
                await producer.start()
                self._producer = producer
        return self._producer

    async def publish(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]] = ()
    ) -> Location:
        """Send one record; returns where it landed once the broker has it."""
        producer = await self._started()
        meta = await producer.send_and_wait(topic, value=value, key=key, headers=list(headers) or None)
        return Location(meta.topic, meta.partition, meta.offset)

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()
