"""What a scrape reads from a running worker: runtime status, partition offsets, parked counts.

Offsets come from the broker: the worker's group watch
(``framework.runtime.group_watch``) reads the end offset of every partition
of the worker's topics, the group's committed offset and the member holding
it, whoever that is, so lag is the group's whether a partition is owned here,
by another worker, by a dead member or by nobody; a scrape asks for a fresh
reading when the last one is older than ``FRESH_S``. Only a worker without a
watch (or before its first reading) falls back to its consumer's assignment,
committed offsets and high watermarks. The rest is what the worker keeps:
``Wiring.status()`` (each runtime's counters, partition queues, sink health and
group view), Faust's monitor (the last offset read per partition) and the
dead-letter WAL's index (records parked and not yet replayed or discarded).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.dlq import DeadLetterWAL, SegmentFilter, Status
from framework.runtime.group_watch import GroupWatch
from framework.runtime.processor import AgentProcessor
from framework.runtime.projector import ProjectionProcessor

__all__ = [
    "PartitionOffsets",
    "Snapshot",
    "take_snapshot",
    "partition_offsets",
    "broker_offsets",
    "FRESH_S",
    "parked_counts",
    "declared_sinks",
    "split_tp",
    "verify_status",
]

log = logging.getLogger(__name__)

#: ``str`` of a Faust ``TP`` or an aiokafka ``TopicPartition``
_TP = re.compile(r"\w*\(topic='(?P<topic>[^']*)', partition=(?P<partition>\d+)\)")


#: A scrape reads the broker again when the group watch's last reading is older than this.
FRESH_S = 1.0


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition: the next offset to read after the last one read here (``consumed``), the
    committed offset and the end of the log (None where not known yet); ``owned``: held by this
    worker; ``stalled_s``: seconds its lag has not shrunk (None: not watched); ``from_start``:
    with nothing committed, the group reads it from offset 0, so its lag is the whole log."""

    runtime: str
    topic: str
    partition: int
    consumed: int | None
    committed: int | None
    end: int | None
    owned: bool = True
    stalled_s: float | None = None
    from_start: bool = False

    @property
    def lag(self) -> int | None:
        """Messages after the committed offset: 0 for an empty partition, None while nothing
        is committed in a partition that has messages (unless ``from_start``)."""
        if self.end is None or (self.committed is None and self.end > 0 and not self.from_start):
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
    #: the change verifier's ``VerifyStats.to_dict()`` with ``behind_seconds`` (None: none runs)
    verify: Mapping[str, Any] | None = None


def split_tp(key: str) -> tuple[str, str]:
    """Topic and partition of a scheduler's partition key (``str`` of a ``TP`` or
    ``TopicPartition``); the whole key as the topic and an empty partition for another form."""
    m = _TP.fullmatch(key)
    return (m["topic"], m["partition"]) if m else (key, "")


def broker_offsets(worker: Any, watch: GroupWatch, topics: Mapping[str, str]) -> list[PartitionOffsets]:
    """Every partition of ``topics`` (topic -> runtime name) as ``watch`` last read it."""
    read: Mapping[Any, int] = getattr(worker.monitor, "tp_read_offsets", None) or {}
    consumed = {(tp.topic, tp.partition): off + 1 for tp, off in read.items()}
    me = str(worker.conf.broker_client_id)
    out = []
    for (topic, partition), p in sorted(watch.partitions.items()):
        runtime = topics.get(topic)
        if runtime is None:
            continue
        owned = p.owner == me
        mine = consumed.get((topic, partition)) if owned else None
        out.append(PartitionOffsets(runtime, topic, partition, mine, p.committed, p.end,
                                    owned=owned, stalled_s=p.stalled_s, from_start=True))  # fmt: skip
    return out


def partition_offsets(worker: Any, topics: Mapping[str, str]) -> list[PartitionOffsets]:
    """The offsets of every partition of ``topics`` (topic -> runtime name) assigned to the
    worker's consumer, as the consumer knows them (no group watch)."""
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
    (pipeline, stage, error class); with object storage only those not uploaded yet."""
    out: dict[tuple[str, str, str], int] = {}
    for seg in dlq.segments(SegmentFilter(statuses=(Status.OPEN, Status.SEALED))):
        p = seg.partition
        key = (p.pipeline, p.stage, p.error_class)
        out[key] = out.get(key, 0) + seg.count
    return out


async def take_snapshot(worker: Any, last: Snapshot | None = None) -> Snapshot:
    """Read ``worker`` (built by ``framework.worker.wiring.build_worker``) now; the WAL's index
    is read off the event loop (when it cannot be read, the parked counts of ``last`` are kept)."""
    wiring = worker.converge
    topics = {r.topic_name: r.name for r in wiring.runtimes}
    watch = next((r.group_watch for r in wiring.runtimes if r.group_watch is not None), None)
    if watch is not None:
        await watch.fresh(FRESH_S)
    runtimes = wiring.status()
    if watch is not None and watch.read_at is not None:
        offsets = broker_offsets(worker, watch, topics)
    else:
        offsets = partition_offsets(worker, topics)
    dlq = wiring.resources.dlq
    parked = last.parked if last is not None else {}
    if dlq is not None:
        try:
            parked = await asyncio.to_thread(parked_counts, dlq)
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail on a closing WAL
            log.warning("metrics: could not read the dead-letter index: %r", exc)
    sinks = {r.name: declared_sinks(r.processor) for r in wiring.runtimes}
    verifier = getattr(wiring, "verifier", None)
    verify = None if verifier is None else verify_status(verifier.stats)
    return Snapshot(runtimes, offsets, parked, sinks, verify)


def verify_status(stats: Any) -> dict[str, Any]:
    """``Snapshot.verify`` of a change verifier's ``VerifyStats``: its counts, how far behind, and
    the age of the last full sweep."""
    swept, now = stats.last_sweep_at, time.time()
    return {**stats.to_dict(), "behind_seconds": stats.behind(now),
            "last_sweep_age_seconds": None if swept is None else max(0.0, now - swept)}  # fmt: skip
