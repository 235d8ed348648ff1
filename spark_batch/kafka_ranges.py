"""Kafka input of the Spark jobs by explicit offset ranges: planned on the driver, read on executors.

No Spark Kafka connector is involved: the driver plans a batch with
``framework.jobs.kafka_ranges`` (``partition_bounds``, ``plan_ranges``) and
executors read their pieces of it (``read_range_sync``; ``read_records_sync``
for a decoder: every record whole, headers and timestamp too); the job's
checkpoint store, not Kafka, remembers how far the job got.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping

from framework.decoders.base import Record as FullRecord
from framework.decoders.base import normalize_headers
from framework.jobs.batches import BatchInput, OffsetRange
from framework.jobs.kafka_ranges import Record, partition_bounds, plan_ranges, read_messages, read_range
from spark_batch.io import iterate_async

__all__ = [
    "Record",
    "partition_bounds",
    "plan_ranges",
    "read_range",
    "read_range_sync",
    "read_records",
    "read_records_sync",
    "split_range",
]


def split_range(r: OffsetRange, size: int) -> list[OffsetRange]:
    """``r`` cut into pieces of at most ``size`` offsets (one Spark task each); none when empty."""
    return [OffsetRange(r.topic, r.partition, s, min(r.end, s + size)) for s in range(r.start, r.end, size)]


def read_range_sync(broker: str, r: OffsetRange) -> Iterator[Record]:
    """``read_range`` from synchronous code (an executor task)."""
    for page in iterate_async(lambda: read_range(broker, r)):
        yield from page


async def read_records(broker: str, r: OffsetRange) -> AsyncIterator[list[FullRecord]]:
    """The records of ``r`` in pages, each as a decoder reads it (``framework.decoders.Record``:
    key, value, topic, partition, offset, timestamp in epoch ms (None when the record has none),
    headers)."""
    async for page in read_messages(broker, r):
        yield [
            FullRecord(
                m.key, m.value, r.topic, r.partition, m.offset,
                m.timestamp if m.timestamp is not None and m.timestamp >= 0 else None,
                normalize_headers(m.headers),
            )
            for m in page
        ]  # fmt: skip


def read_records_sync(broker: str, r: OffsetRange) -> Iterator[FullRecord]:
    """``read_records`` from synchronous code (an executor task)."""
    for page in iterate_async(lambda: read_records(broker, r)):
        yield from page


def ranges_of(batch_input: BatchInput, split: int) -> list[OffsetRange]:
    """The non-empty ranges of a batch, cut for Spark tasks."""
    return [piece for r in batch_input.ranges for piece in split_range(r, split)]


def topics_of(bounds: Mapping[tuple[str, int], object]) -> list[str]:
    """The topics of ``bounds``, sorted."""
    return sorted({t for t, _ in bounds})
