"""Whether a segment file still holds every record its index row counts.

A segment is damaged when a line of it cannot be read (checksum mismatch, torn
or malformed line, bad header), when its file is shorter or longer than the index
(on the bucket: its manifest) says, when fewer or more records read back than it
counts, or when its file is gone. On the bucket, what the store found reading the
object is damage too (``DeadLetterStore.notes``): a missing object, a content digest
that differs from the object's stored SHA-256 or its manifest's, a manifest that
cannot be read.
Its readable records stay readable; a damaged segment is never marked replayed
or discarded, never split and never deleted by cleanup (see ``lifecycle.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framework.dlq.index import SegmentInfo, Status
from framework.dlq.segment import Damage, SegmentReader

__all__ = ["SegmentHealth", "assess", "describe_all"]

_SHOWN = 5


@dataclass(frozen=True)
class SegmentHealth:
    """What reading a segment found: ``readable`` and ``unreadable`` records, and where the damage is."""

    segment: SegmentInfo
    readable: int
    unreadable: int
    damage: tuple[Damage, ...]

    @property
    def damaged(self) -> bool:
        """True when any byte or record of the segment could not be read."""
        return bool(self.damage)

    def describe(self) -> str:
        """One line naming the segment, its unreadable records and where and why it is damaged."""
        where = "; ".join(_where(d) for d in self.damage[:_SHOWN])
        if len(self.damage) > _SHOWN:
            where += f"; and {len(self.damage) - _SHOWN} more"
        noun = "record" if self.unreadable == 1 else "records"
        seg = self.segment
        head = f"{seg.path} (segment {seg.id}, {seg.status.value})"
        if not self.unreadable:
            return f"{head}: {where}"
        at = " at" if self.damage and self.damage[0].length else ":"
        return f"{head}: {self.unreadable} unreadable {noun}{at} {where}"


def _where(d: Damage) -> str:
    """A damage as ``byte OFFSET (LENGTH bytes): REASON``, or only its reason when it names no bytes."""
    return f"byte {d.offset} ({d.length} bytes): {d.reason}" if d.length else d.reason


def assess(
    seg: SegmentInfo,
    reader: SegmentReader | None,
    size: int | None,
    *,
    notes: Sequence[Damage] = (),
    ledger: str = "index",
) -> SegmentHealth:
    """The health of ``seg`` from a finished ``reader`` of its file and the file's ``size``.

    ``reader``/``size`` are None when the file does not exist. An open segment is
    judged only up to ``seg.bytes``, the part its writer has made durable. ``notes`` is
    damage found before reading (see ``DeadLetterStore.notes``); ``ledger`` names what
    counts the segment (the ``index``, or on the bucket its ``manifest``).
    """
    if reader is None or size is None:
        if notes:
            return SegmentHealth(seg, 0, seg.count, tuple(notes))
        if seg.count == 0 and seg.bytes == 0:  # an open segment whose file is being created
            return SegmentHealth(seg, 0, 0, ())
        return SegmentHealth(seg, 0, seg.count, (Damage(0, seg.bytes, "segment file is missing"),))
    damage = [*notes, *reader.damage]
    sizes = f"file has {size} bytes, the {ledger} says {seg.bytes}"
    if size < seg.bytes:
        damage.append(Damage(size, seg.bytes - size, sizes))
    sealed = seg.status is not Status.OPEN  # an open segment's file may hold more than its durable part
    if sealed and size > seg.bytes:
        damage.append(Damage(seg.bytes, size - seg.bytes, sizes))
    lines = sum(1 for d in reader.damage if d.offset > 0)  # damaged lines after the header
    missing = seg.count - reader.count
    if missing > 0 and not damage:
        damage.append(Damage(reader.size, 0, f"{missing} records the {ledger} counts are not in the file"))
    if sealed and missing < 0:
        counts = f"count mismatch: {reader.count} records read, the {ledger} counts {seg.count}"
        damage.append(Damage(0, 0, counts))
    return SegmentHealth(seg, reader.count, max(lines, missing, 0), tuple(damage))


def describe_all(damaged: list[SegmentHealth]) -> str:
    """``describe`` of each damaged segment, one per line."""
    return "\n".join(h.describe() for h in damaged)
