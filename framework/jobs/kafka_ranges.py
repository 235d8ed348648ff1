"""Kafka input by explicit offset ranges, for micro-batch jobs whose checkpoints hold the offsets.

``partition_bounds`` asks the broker for every partition's log start and
end, ``plan_ranges`` plans the next batch from where the previous one ended
(capped per partition), ``read_range`` reads one range with aiokafka and no
consumer group (``read_messages``: its records whole, headers and timestamps
too). A gap (offsets deleted before the job read them) or a log that moved
back is a ``RangeError``, never skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from framework.core.errors import ConvergeError
from framework.jobs.batches import BatchInput, OffsetRange

__all__ = ["Bounds", "RangeError", "Record", "partition_bounds", "plan_ranges", "read_messages", "read_range"]


class RangeError(ConvergeError, ValueError):
    """A topic is missing, lost offsets a job has not read, or sent nothing for too long."""


#: One Kafka record of a range: (topic, partition, offset, key, value).
Record = tuple[str, int, int, bytes | None, bytes | None]
Bounds = dict[tuple[str, int], tuple[int, int]]


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


async def partition_bounds(broker: str, topics: Sequence[str]) -> Bounds:
    """``(log start, log end)`` offsets of every partition of ``topics``; ``RangeError`` for a
    topic the broker does not have."""
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
        tps = []
        for topic in topics:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                raise RangeError(f"no topic {topic!r} on {broker}")
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): (starts[tp], ends[tp]) for tp in tps}
    finally:
        await consumer.stop()


def plan_ranges(previous: BatchInput | None, bounds: Bounds, max_offsets: int | None) -> BatchInput:
    """The next batch's ranges: each partition from where ``previous`` ended (a partition it did
    not read: from its log start) to its log end, at most ``max_offsets`` offsets.

    ``RangeError`` when retention already deleted offsets the job has not read
    (a gap is never skipped silently) or the log ends before the job's
    position (the topic was recreated).
    """
    if max_offsets is not None and max_offsets < 1:
        raise ValueError("max_offsets must be positive")
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


async def read_messages(
    broker: str, r: OffsetRange, *, idle_timeout: float = 30.0, max_records: int = 2000
) -> AsyncIterator[list[ConsumerRecord]]:
    """The records of ``r`` in offset order, in pages, as aiokafka gives them (headers and
    timestamps too). Offsets absent from the log (compaction, transaction markers) are skipped;
    ``RangeError`` when the broker sends nothing new for ``idle_timeout`` seconds before the
    range end."""
    if r.size == 0:
        return
    tp = TopicPartition(r.topic, r.partition)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=_bootstrap(broker),
        enable_auto_commit=False,
        group_id=None,
        auto_offset_reset="none",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position, idle = r.start, 0.0
        while position < r.end:
            got = await consumer.getmany(tp, timeout_ms=500, max_records=max_records)
            page = [m for m in got.get(tp, []) if r.start <= m.offset < r.end]
            if page:
                yield page
            new_position = await consumer.position(tp)
            idle = 0.0 if new_position > position else idle + 0.5
            position = new_position
            if idle >= idle_timeout:
                raise RangeError(
                    f"{r.topic}[{r.partition}]: nothing past offset {position} for {idle_timeout}s"
                )
    finally:
        await consumer.stop()


async def read_range(
    broker: str, r: OffsetRange, *, idle_timeout: float = 30.0, max_records: int = 2000
) -> AsyncIterator[list[Record]]:
    """The records of ``r`` in offset order, in pages of (topic, partition, offset, key, value)
    (``read_messages``)."""
    async for page in read_messages(broker, r, idle_timeout=idle_timeout, max_records=max_records):
        yield [(r.topic, r.partition, m.offset, m.key, m.value) for m in page]
