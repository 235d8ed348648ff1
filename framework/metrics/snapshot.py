"""What a scrape reads from a running worker: runtime status, partition offsets, parked counts.

Everything comes from what the worker already keeps: ``Wiring.status()``
(each runtime's counters, partition queues and sink health), the Faust
consumer (assignment, committed offsets, high watermarks), Faust's monitor
(the last offset read per partition) and the dead-letter WAL's index (records
parked and not yet replayed or discarded).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.dlq import DeadLetterWAL, SegmentFilter, Status
from framework.runtime.processor import AgentProcessor
from framework.runtime.projector import ProjectionProcessor

if TYPE_CHECKING:
    from framework.app import ConvergeFaustApp

__all__ = [
    "PartitionOffsets",
    "Snapshot",
    "take_snapshot",
    "partition_offsets",
    "parked_counts",
    "declared_sinks",
    "split_tp",
]

log = logging.getLogger(__name__)

#: ``str`` of a Faust ``TP`` or an aiokafka ``TopicPartition``
_TP = re.compile(r"\w*\(topic='(?P<topic>[^']*)', partition=(?P<partition>\d+)\)")


@dataclass(frozen=True)
class PartitionOffsets:
    """One assigned partition: the next offset to read after the last one read (``consumed``),
    the committed offset and the end of the log; None where not known yet."""

    runtime: str
    topic: str
    partition: int
    consumed: int | None
    committed: int | None
    end: int | None

    @property
    def lag(self) -> int | None:
        """Messages after the committed offset: 0 for an empty partition, None while nothing
        is committed in a partition that has messages."""
        if self.end is None or (self.committed is None and self.end > 0):
            return None
        return max(0, self.end - (self.committed or 0))


@dataclass(frozen=True)
class Snapshot:
    """One reading of a worker. ``runtimes``: ``Wiring.status()``; ``parked``: live parked
    records by (runtime, stage, error class); ``sinks``: the sinks each runtime writes to
    (reported up, at 0 failures, until the runtime's status says otherwise)."""

    runtimes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    offsets: Sequence[PartitionOffsets] = ()
    parked: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    sinks: Mapping[str, Sequence[str]] = field(default_factory=dict)


def split_tp(key: str) -> tuple[str, str]:
    """Topic and partition of a scheduler's partition key (``str`` of a ``TP`` or
    ``TopicPartition``); the whole key as the topic and an empty partition for another form."""
    m = _TP.fullmatch(key)
    return (m["topic"], m["partition"]) if m else (key, "")


def partition_offsets(worker: Any, topics: Mapping[str, str]) -> list[PartitionOffsets]:
    """The offsets of every assigned partition of ``topics`` (topic -> runtime name)."""
    consumer = worker.consumer
    try:
        assigned = sorted(consumer.assignment())
    except Exception:  # noqa: BLE001 - no consumer thread yet: nothing assigned
        return []
    committed: Mapping[Any, int | None] = getattr(consumer, "_committed_offset", {})
    read: Mapping[Any, int] = getattr(worker.monitor, "tp_read_offsets", None) or {}
    out = []
    for tp in assigned:
        runtime = topics.get(tp.topic)
        if runtime is None:
            continue
        try:
            end = consumer.highwater(tp)
        except Exception:  # noqa: BLE001 - not fetched yet
            end = None
        last = read.get(tp)
        done = committed.get(tp)
        out.append(PartitionOffsets(runtime, tp.topic, tp.partition,
                                    done if last is None else last + 1, done, end))  # fmt: skip
    return out


def declared_sinks(processor: Any) -> tuple[str, ...]:
    """The names of the sinks ``processor`` calls (as ``processor.bounded`` is given them)."""
    if isinstance(processor, AgentProcessor):
        return tuple(s.name for s in processor.sinks)
    if isinstance(processor, ProjectionProcessor):
        return ("wide_column", "index")  # the documents' reads, then the index's bulk writes
    return ()


def parked_counts(dlq: DeadLetterWAL) -> dict[tuple[str, str, str], int]:
    """Records in open or sealed segments (parked, neither replayed nor discarded) by
    (pipeline, stage, error class)."""
    out: dict[tuple[str, str, str], int] = {}
    for seg in dlq.segments(SegmentFilter(statuses=(Status.OPEN, Status.SEALED))):
        p = seg.partition
        key = (p.pipeline, p.stage, p.error_class)
        out[key] = out.get(key, 0) + seg.count
    return out


async def take_snapshot(worker: ConvergeFaustApp, last: Snapshot | None = None) -> Snapshot:
    """Read ``worker`` (built by ``App.worker``) now; the WAL's index is read off the event loop
    (when it cannot be read, the parked counts of ``last`` are kept)."""
    wiring = worker.converge
    runtimes = wiring.status()
    offsets = partition_offsets(worker, {r.topic_name: r.name for r in wiring.runtimes})
    dlq = wiring.resources.dlq
    parked = last.parked if last is not None else {}
    if dlq is not None:
        try:
            parked = await asyncio.to_thread(parked_counts, dlq)
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail on a closing WAL
            log.warning("metrics: could not read the dead-letter index: %r", exc)
    sinks = {r.name: declared_sinks(r.processor) for r in wiring.runtimes}
    return Snapshot(runtimes, offsets, parked, sinks)
