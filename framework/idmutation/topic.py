"""The ID mutation job's Kafka side: offset ranges of the requests topic, reading a range, publishing
the changed map entries (aiokafka, no consumer group: the job checkpoints hold the offsets)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from framework.jobs.batches import OffsetRange
from framework.jobs.kafka_ranges import Bounds, RangeError, partition_bounds, read_range
from framework.kafka_admin import produce

__all__ = ["KafkaLog", "Record", "RangeError"]

#: One record of a range: (partition, offset, key, value).
Record = tuple[int, int, bytes | None, bytes | None]


class KafkaLog:
    """Reads offset ranges of topics on ``broker`` and publishes records to them."""

    def __init__(self, broker: str, *, idle_timeout: float = 30.0) -> None:
        self.broker = broker
        self.idle_timeout = idle_timeout

    async def bounds(self, topics: Sequence[str]) -> Bounds:
        """``(log start, log end)`` of every partition of ``topics``; RangeError for a missing topic."""
        return await partition_bounds(self.broker, topics)

    async def read(self, r: OffsetRange) -> list[Record]:
        """Every record of ``r`` in offset order (offsets absent from the log are skipped)."""
        pages = read_range(self.broker, r, idle_timeout=self.idle_timeout, max_records=5000)
        return [(p, o, k, v) async for page in pages for _, p, o, k, v in page]

    async def read_all(self, ranges: Iterable[OffsetRange]) -> list[tuple[str, Record]]:
        """The records of every range, ranges read concurrently."""
        rs = [r for r in ranges if r.size]
        pages = await asyncio.gather(*(self.read(r) for r in rs))
        return [(r.topic, rec) for r, page in zip(rs, pages, strict=True) for rec in page]

    async def publish(self, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> int:
        """Send keyed records and wait until the broker has them all."""
        return await produce(self.broker, topic, records)
