"""The ID mutation job's Kafka side: offset ranges of the requests topic, reading a range, publishing
the changed map entries (aiokafka, no consumer group: the job checkpoints hold the offsets)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.jobs.checkpoint import BatchInput, OffsetRange
from framework.kafka_admin import produce

__all__ = ["KafkaLog", "Record", "next_ranges", "RangeError"]

#: One record of a range: (partition, offset, key, value).
Record = tuple[int, int, bytes | None, bytes | None]
Bounds = dict[tuple[str, int], tuple[int, int]]


class RangeError(RuntimeError):
    """The topic lost offsets the job has not read, or is gone."""


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


def next_ranges(previous: BatchInput | None, bounds: Bounds, max_offsets: int | None = None) -> BatchInput:
    """Each partition from where ``previous`` ended (else its log start) to its end, at most
    ``max_offsets``; ``RangeError`` for deleted offsets not yet read or a log that moved back."""
    ends = {} if previous is None else previous.ends()
    ranges = []
    for (topic, partition), (first, last) in sorted(bounds.items()):
        start = ends.get((topic, partition), first)
        if start < first:
            raise RangeError(
                f"{topic}[{partition}]: offsets {start}..{first - 1} were deleted before the job read them"
            )
        if start > last:
            raise RangeError(
                f"{topic}[{partition}]: the log ends at {last}, before the job's position {start}"
            )
        end = last if max_offsets is None else min(last, start + max_offsets)
        ranges.append(OffsetRange(topic, partition, start, end))
    return BatchInput(ranges=tuple(ranges))


class KafkaLog:
    """Reads offset ranges of topics on ``broker`` and publishes records to them."""

    def __init__(self, broker: str, *, idle_timeout: float = 30.0) -> None:
        self.broker = broker
        self.idle_timeout = idle_timeout

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=_bootstrap(self.broker),
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="none",
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )

    async def bounds(self, topics: Sequence[str]) -> Bounds:
        """``(log start, log end)`` of every partition of ``topics``; RangeError for a missing topic."""
        consumer = self._consumer()
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
            tps = []
            for topic in topics:
                parts = consumer.partitions_for_topic(topic)
                if not parts:
                    raise RangeError(f"no topic {topic!r} on {self.broker}")
                tps += [TopicPartition(topic, p) for p in sorted(parts)]
            starts = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            return {(tp.topic, tp.partition): (starts[tp], ends[tp]) for tp in tps}
        finally:
            await consumer.stop()

    async def read(self, r: OffsetRange) -> list[Record]:
        """Every record of ``r`` in offset order (offsets absent from the log are skipped)."""
        if r.size == 0:
            return []
        tp = TopicPartition(r.topic, r.partition)
        consumer = self._consumer()
        await consumer.start()
        out: list[Record] = []
        try:
            consumer.assign([tp])
            consumer.seek(tp, r.start)
            position, idle = r.start, 0.0
            while position < r.end:
                got = await consumer.getmany(tp, timeout_ms=500, max_records=5000)
                out += [(r.partition, m.offset, m.key, m.value) for m in got.get(tp, [])
                        if r.start <= m.offset < r.end]  # fmt: skip
                new_position = await consumer.position(tp)
                idle = 0.0 if new_position > position else idle + 0.5
                position = new_position
                if idle >= self.idle_timeout:
                    raise RangeError(f"{r.topic}[{r.partition}]: nothing past offset {position} for {idle}s")
        finally:
            await consumer.stop()
        return out

    async def read_all(self, ranges: Iterable[OffsetRange]) -> list[tuple[str, Record]]:
        """The records of every range, ranges read concurrently."""
        rs = [r for r in ranges if r.size]
        pages = await asyncio.gather(*(self.read(r) for r in rs))
        return [(r.topic, rec) for r, page in zip(rs, pages, strict=True) for rec in page]

    async def publish(self, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> int:
        """Send keyed records and wait until the broker has them all."""
        return await produce(self.broker, topic, records)
