"""Re-publishing parked events to Kafka in the order they were parked.

Only sealed segments are replayed (an open one is still being written; it is
sealed by rotation, by the writer's close, or by ``converge dlq`` when no writer
is alive). Records of all selected partitions are sent in global write order
(their lsn) with their original key and value, by an idempotent producer with
``acks=all``. A segment is marked replayed only after the broker acknowledged
every selected record of it; a failure mid-way leaves the unfinished segments
sealed, so a second replay may send some records twice (at least once).

Every selected segment is read in full before anything is sent: a damaged one
(see ``health.py``) is left out whole, none of its records sent and its status
unchanged, and named in ``ReplayReport.damaged``.

``withhold`` (``framework.erasure.parked.parked_screen``: a record that
mentions an erased subject) screens every record: a withheld record is not
sent, is counted in ``ReplayReport.withheld``, and its segment is marked
replayed like the others (a later replay does not send it either).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from aiokafka import AIOKafkaProducer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter, Status
from framework.dlq.lifecycle import settle
from framework.dlq.record import ParkedRecord
from framework.dlq.store import DeadLetterStore, Entry, SegmentEnd

__all__ = ["replay", "ReplayReport", "ORIGIN_HEADER"]

ORIGIN_HEADER = "converge-dlq-origin"


@dataclass(frozen=True)
class ReplayReport:
    """Records sent (per target topic), segments marked replayed, open and damaged segments left out."""

    records: int = 0
    segments: int = 0
    skipped_open: int = 0
    topics: dict[str, int] = field(default_factory=dict)
    damaged: tuple[SegmentHealth, ...] = ()
    #: records not sent: ``withhold`` (the erasure's replay screen) was true for them
    withheld: int = 0


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        disable=not enabled, transient=False,
    )  # fmt: skip


async def replay(
    store: DeadLetterStore,
    flt: SegmentFilter,
    *,
    broker: str,
    topic: str | None = None,
    progress: bool = False,
    batch_size: int = 500,
    withhold: Callable[[ParkedRecord], bool] | None = None,
) -> ReplayReport:
    """Send the sealed records matching ``flt`` to their source topic (or ``topic``) and mark them.

    Damaged segments are left out; records ``withhold`` is true for are not sent (see the module
    docstring).
    """
    sealed = replace(flt, statuses=(Status.SEALED,))
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.split("://", 1)[-1], acks="all", enable_idempotence=True, linger_ms=5
    )
    sent: Counter[str] = Counter()
    marked = withheld = 0
    pending: list[asyncio.Future[object]] = []
    ended: list[SegmentEnd] = []
    damaged: dict[int, SegmentHealth] = {}

    async def flush() -> None:
        nonlocal marked
        if pending:
            await asyncio.gather(*pending)
            pending.clear()
        for end in ended:
            if end.health.damaged:  # damaged after the check: its records went out, it stays sealed
                damaged[end.segment.id] = end.health
            elif end.scanned and not end.selected:
                continue  # none of its records matched: they stay parked
            elif settle(store, end.segment, flt, Status.REPLAYED) is not None:  # an empty one too
                marked += 1
        ended.clear()

    with store.exclusive():
        intact = []
        for seg in store.segments(sealed):
            health = store.check(seg)
            if health is not None and health.damaged:
                damaged[seg.id] = health
            elif health is not None:
                intact.append(seg)
        total = sum(s.count for s in intact)
        await producer.start()
        try:
            with _progress(progress) as bar:
                task = bar.add_task("replay", total=total)
                for item in store.merged(sealed, intact):
                    if isinstance(item, SegmentEnd):
                        ended.append(item)
                        bar.advance(task, item.scanned - item.selected)
                        continue
                    assert isinstance(item, Entry)
                    if withhold is not None and withhold(item.record):
                        withheld += 1
                        bar.advance(task)
                        continue
                    pending.append(await _send(producer, item, topic))
                    sent[topic or item.record.topic] += 1
                    bar.advance(task)
                    if len(pending) >= batch_size:
                        await flush()
                await flush()
        finally:
            await producer.stop()
        skipped = len(store.segments(replace(flt, statuses=(Status.OPEN,))))
    return ReplayReport(sum(sent.values()), marked, skipped, dict(sent), tuple(damaged.values()), withheld)


async def _send(producer: AIOKafkaProducer, item: Entry, topic: str | None) -> asyncio.Future[object]:
    rec = item.record
    origin = f"{rec.topic}:{rec.partition}:{rec.offset}".encode()
    fut: asyncio.Future[object] = await producer.send(
        topic or rec.topic, key=rec.key, value=rec.value, headers=[(ORIGIN_HEADER, origin)]
    )
    return fut
