"""Status changes of sealed segments: mark (splitting a partly selected one), discard, cleanup, salvage.

Statuses apply to whole segment files. When a time window selects only some
records of a segment, the segment is first split into two new files (the
selected records, the others) swapped in for it in one index transaction, so
marking the selected part never touches the records outside the window.

A damaged segment (see ``health.py``) is never marked, split or deleted: those
would drop its unreadable records for good. ``salvage`` is the one way out: its
readable records go to a new segment with the same status and the damaged file
moves to ``quarantine/`` (never read or deleted by converge).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from framework.dlq.health import SegmentHealth
from framework.dlq.index import NewSegment, SegmentFilter, SegmentInfo, Status
from framework.dlq.record import ParkedRecord, record_to_json
from framework.dlq.segment import SegmentReader, SegmentWriter, encode_line, fsync_dir
from framework.dlq.store import DeadLetterStore

__all__ = [
    "settle", "discard", "cleanup", "salvage", "Outcome", "CleanupReport", "Salvaged", "QUARANTINE",
    "LOST_SUFFIX",
]  # fmt: skip

log = logging.getLogger("framework.dlq")

QUARANTINE = "quarantine"
LOST_SUFFIX = ".lost.json"


@dataclass(frozen=True)
class Outcome:
    """What a discard changed: segments marked, records in them, open and damaged segments left alone."""

    segments: int = 0
    records: int = 0
    skipped_open: int = 0
    damaged: tuple[SegmentHealth, ...] = ()


@dataclass(frozen=True)
class CleanupReport:
    """Segment files deleted, bytes freed, unindexed ``.seg`` files found and damaged ones kept."""

    segments: int
    bytes: int
    orphans: list[str]
    damaged: tuple[SegmentHealth, ...] = ()


@dataclass(frozen=True)
class Salvaged:
    """A damaged segment replaced by a copy of its readable records; the original moved to quarantine.

    ``missing``: there was no file to move (its object or file was gone): ``quarantined`` is then
    the record of the loss (``<path>.lost.json``), its records counted as lost.
    """

    health: SegmentHealth
    new_path: str | None
    quarantined: str
    missing: bool = False


class _Part:
    """The re-encoded records of one side of a split, with their counters."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.first_lsn: int | None = None
        self.last_lsn: int | None = None

    def add(self, lsn: int, rec: ParkedRecord) -> None:
        self.lines.append(encode_line(record_to_json(rec, lsn)))
        ts = rec.parked_at
        self.first_lsn = lsn if self.first_lsn is None else self.first_lsn
        self.last_lsn = lsn
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def write(self, store: DeadLetterStore, seg: SegmentInfo, status: Status) -> tuple[Path, NewSegment]:
        path = store.abspath(seg).parent / f"{self.first_lsn:016d}-{uuid.uuid4().hex[:16]}.seg"
        w = SegmentWriter.create(path, seg.partition, seg.created_at)
        try:
            size = w.append(b"".join(self.lines))
        finally:
            w.close()
        new = NewSegment(seg.partition, store.relpath(path), status, len(self.lines), size, self.first_ts,
                         self.last_ts, self.first_lsn, self.last_lsn, seg.created_at)  # fmt: skip
        return path, new


def _split(store: DeadLetterStore, seg: SegmentInfo, flt: SegmentFilter, status: Status) -> int | None:
    """Mark the records of ``seg`` inside ``flt``'s window with ``status``; returns how many."""
    taken, kept = _Part(), _Part()
    reader = SegmentReader(store.abspath(seg))
    for lsn, rec in reader:
        (taken if flt.in_window(rec.parked_at) else kept).add(lsn, rec)
    if reader.damage or reader.count < seg.count:  # rewriting would drop the unreadable records
        return None
    if not taken.lines:
        return None
    if not kept.lines:
        return _mark(store, seg, status, len(taken.lines))
    written: list[Path] = []
    rows: list[NewSegment] = []
    swapped = False
    try:
        for part, st in ((taken, status), (kept, Status.SEALED)):
            path, row = part.write(store, seg, st)
            written.append(path)
            rows.append(row)
        swapped = store.index.replace(seg.id, Status.SEALED, rows, store.clock())
    finally:
        if not swapped:
            for p in written:
                p.unlink(missing_ok=True)
    if not swapped:
        return None
    original = store.abspath(seg)
    original.unlink(missing_ok=True)
    fsync_dir(original.parent)
    return len(taken.lines)


def _inside(seg: SegmentInfo, flt: SegmentFilter) -> bool:
    if seg.first_ts is None or seg.last_ts is None:
        return flt.since is None and flt.until is None
    return (flt.since is None or seg.first_ts >= flt.since) and (flt.until is None or seg.last_ts < flt.until)


def _mark(store: DeadLetterStore, seg: SegmentInfo, status: Status, n: int) -> int | None:
    return n if store.index.set_status(seg.id, status, store.clock(), Status.SEALED) else None


def settle(store: DeadLetterStore, seg: SegmentInfo, flt: SegmentFilter, status: Status) -> int | None:
    """Give the sealed ``seg`` the ``status`` for its records in ``flt``'s window; returns how many.

    A segment wholly inside the window is marked as is; a partly covered one is split first.
    None when nothing changed: ``seg`` is no longer sealed (another command got there first),
    no record of it is in the window, or it is damaged. The caller checks a segment it marks
    whole (``DeadLetterStore.check``); a split checks its own read.
    """
    if _inside(seg, flt):
        return _mark(store, seg, status, seg.count)
    return _split(store, seg, flt, status)


def discard(store: DeadLetterStore, flt: SegmentFilter) -> Outcome:
    """Mark the sealed records matching ``flt`` discarded (deleted later by ``cleanup``)."""
    segments = records = 0
    damaged: list[SegmentHealth] = []
    with store.exclusive():
        for seg in store.segments(replace(flt, statuses=(Status.SEALED,))):
            health = store.check(seg)
            if health is None:
                continue
            if health.damaged:
                damaged.append(health)
                continue
            n = settle(store, seg, flt, Status.DISCARDED)
            if n is not None:
                segments, records = segments + 1, records + n
        skipped = len(store.segments(replace(flt, statuses=(Status.OPEN,))))
    return Outcome(segments, records, skipped, tuple(damaged))


def cleanup(store: DeadLetterStore, grace_s: float, *, dry_run: bool = False) -> CleanupReport:
    """Delete replayed and discarded segments marked at least ``grace_s`` ago; report unindexed files.

    Each file is read first: a damaged one is kept and reported (``salvage`` deals with it).
    """
    cutoff = store.clock() - grace_s
    n = size = 0
    damaged: list[SegmentHealth] = []
    with store.exclusive():
        for seg in store.segments(SegmentFilter(statuses=(Status.REPLAYED, Status.DISCARDED))):
            if seg.status_at > cutoff:
                continue
            health = store.check(seg)
            if health is None:
                continue
            if health.damaged:
                damaged.append(health)
                continue
            n, size = n + 1, size + seg.bytes
            if dry_run:
                continue
            path = store.abspath(seg)
            path.unlink(missing_ok=True)
            store.index.delete(seg.id)
            _prune(store, path.parent)
        indexed = store.index.paths()
        orphans = sorted(r for r in (store.relpath(p) for p in store.segments_root.rglob("*.seg"))
                         if r not in indexed)  # fmt: skip
    for rel in orphans:
        log.warning("dead-letter WAL: %s is not in the index (left in place; a crash leftover or a lost"
                    " index)", rel)  # fmt: skip
    return CleanupReport(n, size, orphans, tuple(damaged))


def salvage(store: DeadLetterStore, flt: SegmentFilter, *, dry_run: bool = False) -> list[Salvaged]:
    """Replace each damaged, non-open segment matching ``flt`` by a copy of its readable records.

    The copy keeps the records' lsns and the segment's status; the damaged file moves to
    ``quarantine/<same relative path>`` after the index swap, so a crash leaves either the old
    row or the new one (and at worst the damaged file unindexed in place, which ``cleanup``
    reports); the damaged bytes are never deleted.
    """
    done: list[Salvaged] = []
    statuses = tuple(s for s in (flt.statuses or tuple(Status)) if s is not Status.OPEN)
    with store.exclusive():
        for seg in store.segments(replace(flt, statuses=statuses)):
            health = store.check(seg)
            if health is None or not health.damaged:
                continue
            target = store.root / QUARANTINE / seg.path
            if dry_run:
                done.append(Salvaged(health, None, store.relpath(target)))
                continue
            done.append(_salvage_one(store, health, target))
    return done


def _salvage_one(store: DeadLetterStore, health: SegmentHealth, target: Path) -> Salvaged:
    seg = health.segment
    original = store.abspath(seg)
    good = _Part()
    if original.exists():
        for lsn, rec in SegmentReader(original, quiet=True):
            good.add(lsn, rec)
    swapped, written = _swap(store, seg, good)
    if not swapped:
        raise RuntimeError(f"segment {seg.id} changed while it was being salvaged")
    new_path = None if written is None else store.relpath(written)
    if not original.exists():  # nothing to keep: record what was lost instead
        lost = target.with_name(target.name + LOST_SUFFIX)
        lost.parent.mkdir(parents=True, exist_ok=True)
        body = {"segment": seg.path, "why": health.describe(), "records_lost": health.unreadable,
                "at": store.clock()}  # fmt: skip
        lost.write_text(json.dumps(body, sort_keys=True) + "\n")
        fsync_dir(lost.parent)
        log.error("dead-letter WAL: cleared %s; %d records lost (recorded in %s)", health.describe(),
                  health.unreadable, lost)  # fmt: skip
        return Salvaged(health, new_path, store.relpath(lost), missing=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    original.replace(target)
    fsync_dir(target.parent)
    fsync_dir(original.parent)
    _prune(store, original.parent)
    log.warning("dead-letter WAL: salvaged %s; damaged file kept at %s", health.describe(), target)
    return Salvaged(health, new_path, store.relpath(target))


def _swap(store: DeadLetterStore, seg: SegmentInfo, kept: _Part) -> tuple[bool, Path | None]:
    """Index a new segment of the ``kept`` records (none: no segment) in place of ``seg``, and
    the new file; False, and nothing written left behind, when ``seg`` changed meanwhile. The
    old file stays."""
    written: Path | None = None
    rows: list[NewSegment] = []
    swapped = False
    try:
        if kept.lines:
            written, row = kept.write(store, seg, seg.status)
            rows.append(row)
        swapped = store.index.replace(seg.id, seg.status, rows, store.clock())
    finally:
        if not swapped and written is not None:
            written.unlink(missing_ok=True)
    return swapped, written if swapped else None


def _prune(store: DeadLetterStore, d: Path) -> None:
    """Remove now-empty partition directories up to ``segments/``."""
    while d != store.segments_root and d.is_relative_to(store.segments_root):
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent
