"""Whether a segment file still holds every record its index row counts.

A segment is damaged when a line of it cannot be read (checksum mismatch, torn
or malformed line, bad header), when its file is shorter than the index says,
when fewer records read back than the index counts, or when its file is gone.
Its readable records stay readable; a damaged segment is never marked replayed
or discarded, never split and never deleted by cleanup (see ``lifecycle.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.dlq.index import SegmentInfo
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
        """One line naming the segment, its unreadable records and the byte offsets of the damage."""
        where = "; ".join(f"byte {d.offset} ({d.length} bytes): {d.reason}" for d in self.damage[:_SHOWN])
        if len(self.damage) > _SHOWN:
            where += f"; and {len(self.damage) - _SHOWN} more"
        noun = "record" if self.unreadable == 1 else "records"
        seg = self.segment
        head = f"{seg.path} (segment {seg.id}, {seg.status.value})"
        return f"{head}: {self.unreadable} unreadable {noun} at {where}"


def assess(seg: SegmentInfo, reader: SegmentReader | None, size: int | None) -> SegmentHealth:
    """The health of ``seg`` from a finished ``reader`` of its file and the file's ``size``.

    ``reader``/``size`` are None when the file does not exist. An open segment is
    judged only up to ``seg.bytes``, the part its writer has made durable.
    """
    if reader is None or size is None:
        if seg.count == 0 and seg.bytes == 0:  # an open segment whose file is being created
            return SegmentHealth(seg, 0, 0, ())
        return SegmentHealth(seg, 0, seg.count, (Damage(0, seg.bytes, "segment file is missing"),))
    damage = list(reader.damage)
    if size < seg.bytes:
        damage.append(Damage(size, seg.bytes - size, f"file has {size} bytes, the index says {seg.bytes}"))
    lines = sum(1 for d in reader.damage if d.offset > 0)  # damaged lines after the header
    missing = seg.count - reader.count
    if missing > 0 and not damage:
        damage.append(Damage(reader.size, 0, f"{missing} indexed records are not in the file"))
    return SegmentHealth(seg, reader.count, max(lines, missing, 0), tuple(damage))


def describe_all(damaged: list[SegmentHealth]) -> str:
    """``describe`` of each damaged segment, one per line."""
    return "\n".join(h.describe() for h in damaged)
