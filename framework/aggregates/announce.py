"""Announcing changed groups from outside a worker (``converge erase`` and the other jobs that
re-project entities): a Kafka producer onto each aggregate's group topic, so that the stream's
totals processor recomputes them (``totals.py``: totals are written by that processor only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer

from framework.aggregates.contributions import Changed
from framework.aggregates.totals import group_records
from framework.core.aggregate import Aggregate
from framework.kafka_admin import end_offsets, ensure_topics

__all__ = ["KafkaAnnouncer"]


class KafkaAnnouncer:
    """``announce(aggregate, changed)`` onto ``topic_of(aggregate)`` at ``broker`` (``kafka://host:port``);
    returns once the broker has every record. ``close`` stops the producer."""

    def __init__(self, broker: str, topic_of: Callable[[Aggregate], str], partitions: int) -> None:
        self.broker, self.topic_of, self.partitions = broker, topic_of, partitions
        self._producer: AIOKafkaProducer | None = None
        self._counts: dict[str, int] = {}

    async def __call__(self, aggregate: Aggregate, changed: Sequence[Changed]) -> None:
        topic = self.topic_of(aggregate)
        if topic not in self._counts:
            await ensure_topics(self.broker, {topic: self.partitions})
            self._counts[topic] = len(await end_offsets(self.broker, topic))
        if self._producer is None:
            self._producer = AIOKafkaProducer(
                bootstrap_servers=self.broker.split("://", 1)[-1], acks="all", enable_idempotence=True
            )
            await self._producer.start()
        for partition, key, value in group_records(aggregate, changed, self._counts[topic]):
            await self._producer.send_and_wait(topic, value, key=key, partition=partition)

    async def close(self) -> None:
        """Stop the producer (if one started)."""
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
