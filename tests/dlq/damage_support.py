"""A WAL of 39 parked records in three segments, two of them damaged the way disks damage files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentInfo
from tests.dlq.support import FakeClock, rec


@dataclass(frozen=True)
class DamagedWAL:
    """The store, its three segments by error class, and the byte offsets of the two damaged lines."""

    root: Path
    segments: dict[str, SegmentInfo]
    flip_at: int
    torn_at: int

    def store(self) -> DeadLetterStore:
        """A fresh reader of the root."""
        return DeadLetterStore(self.root)

    def path(self, error_class: str) -> Path:
        """The file of a segment."""
        return self.store().abspath(self.segments[error_class])


def damaged_wal(root: Path, topic: str = "src") -> DamagedWAL:
    """28 records (one bit flipped in the 11th), 2 records (the last one cut short) and 9 intact ones."""
    clock = FakeClock(1_700_000_000.0)
    with DeadLetterWAL(root, clock=clock) as wal:
        for i, error_class in enumerate(["Bitflip"] * 28 + ["Cut"] * 2 + ["Intact"] * 9):
            clock.tick(1)
            wal.park_sync(rec(i, error_class=error_class, topic=topic))
    store = DeadLetterStore(root)
    segments = {s.partition.error_class: s for s in store.segments()}
    assert [s.count for s in segments.values()] == [28, 2, 9]

    flipped = store.abspath(segments["Bitflip"])
    data = bytearray(flipped.read_bytes())
    lines = data.splitlines(keepends=True)
    flip_at = sum(len(x) for x in lines[:11])  # the header, then 10 records
    data[flip_at + 40] ^= 0x04  # one bit inside the JSON of the 11th record
    flipped.write_bytes(bytes(data))

    truncated = store.abspath(segments["Cut"])
    raw = truncated.read_bytes()
    torn_at = raw.rstrip(b"\n").rfind(b"\n") + 1
    truncated.write_bytes(raw[: torn_at + 30])
    store.close()
    return DamagedWAL(root, segments, flip_at, torn_at)
