"""Reading a dead-letter WAL directory, safely while a writer appends to it.

Layout of a WAL root::

    index.sqlite3                      the segment index (see ``index.py``)
    writer.lock                        held (flock) by the one live ``DeadLetterWAL``
    ops.lock                           held while replay/discard/cleanup change segments
    segments/<pipeline>/<event_type>/<stage>/<error_class>/<first-lsn>-<token>.seg

A store given an ``ObjectStore`` fetches a segment whose bytes are there (its ``uploads`` row
names the object; ``bucket.py`` mirrors the tracker that way) into its place when first read
(``local``).
"""

from __future__ import annotations

import fcntl
import heapq
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from framework.dlq.health import SegmentHealth, assess
from framework.dlq.index import SegmentFilter, SegmentIndex, SegmentInfo, Status
from framework.dlq.names import UnsafePathError
from framework.dlq.record import ParkedRecord
from framework.dlq.segment import Damage, SegmentReader, fsync_dir
from stores.objects.store import ObjectStore

__all__ = ["DeadLetterStore", "Entry", "SegmentEnd", "LIVE"]

LIVE = (Status.OPEN, Status.SEALED)

log = logging.getLogger("framework.dlq")


@dataclass(frozen=True)
class Entry:
    """A record read from a segment, with its log sequence number."""

    segment: SegmentInfo
    lsn: int
    record: ParkedRecord


@dataclass(frozen=True)
class SegmentEnd:
    """Emitted after the last record of a segment: records read, records matched, and its health."""

    segment: SegmentInfo
    scanned: int
    selected: int
    health: SegmentHealth


class DeadLetterStore:
    """The index plus the segment files of a WAL root; no writer lock needed.

    Damaged lines met while reading records are logged as warnings unless ``quiet``
    (``SegmentEnd.health`` reports them either way). ``objects`` is where the segments that
    have an upload row are read from (None: every segment is a local file).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        quiet: bool = False,
        objects: ObjectStore | None = None,
    ) -> None:
        self.objects = objects
        self.root = Path(root).resolve()
        self.quiet = quiet
        self.root.mkdir(parents=True, exist_ok=True)
        self.segments_root = self.root / "segments"
        self.segments_root.mkdir(exist_ok=True)
        self.clock = clock
        self.index = SegmentIndex(self.root / "index.sqlite3")
        #: Damage of segments found outside their files (by path): what reading their objects
        #: found (``local``), or a manifest that could not be read (``bucket.py``).
        self.notes: dict[str, list[Damage]] = {}

    def abspath(self, seg: SegmentInfo | str) -> Path:
        """The absolute file of a segment; refuses paths outside ``segments/``."""
        rel = seg if isinstance(seg, str) else seg.path
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.segments_root):
            raise UnsafePathError(f"segment path {rel!r} is outside {self.segments_root}")
        return path

    def local(self, seg: SegmentInfo) -> Path:
        """The file of ``seg``; one whose bytes are in object storage is fetched there first.

        The object is checked as it is read: what is wrong with it goes to ``notes`` (the
        segment's health reports it): a missing object (the file stays missing), a body whose
        content digest differs from the object's stored SHA-256 or from its manifest's (the
        bytes are kept, so the reader still finds every readable record and names the damaged
        lines), a body cut short on the way (the file stays missing). An object-storage outage
        raises ``TransientObjectError``.
        """
        path = self.abspath(seg)
        if self.objects is None or path.exists():
            return path
        up = self.index.upload(seg.id)
        if up is None:
            return path
        where = f"{self.objects.url.rstrip('/')}/{up.name}"
        try:
            got = self.objects.fetch(up.name)
        except FileNotFoundError:
            self._note(seg, Damage(0, seg.bytes, f"segment object is missing: no object at {where}"))
            return path
        problem = got.problem()
        if problem is not None and len(got.data) != got.size:  # cut short on the way: nothing to read
            self._note(seg, Damage(0, seg.bytes, f"segment object unreadable: {problem}"))
            log.error("dead-letter segment %s: its object is damaged: %s", seg.path, problem)
            return path
        if problem is not None:
            self._note(seg, Damage(0, got.size, problem))
            log.error("dead-letter segment %s: its object is damaged: %s", seg.path, problem)
        elif up.sha256 and got.actual_sha256 != up.sha256:
            why = (f"content digest mismatch: the object's {got.size} bytes have SHA-256 {got.actual_sha256},"
                   f" its manifest names {up.sha256}")  # fmt: skip
            self._note(seg, Damage(0, got.size, why))
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.fetching")
        with open(part, "wb") as f:
            f.write(got.data)
            f.flush()
            os.fsync(f.fileno())
        part.replace(path)
        fsync_dir(path.parent)
        return path

    def _note(self, seg: SegmentInfo, damage: Damage) -> None:
        """Remember ``damage`` of ``seg`` found outside its file (reported by its health)."""
        self.notes.setdefault(seg.path, [])
        if damage not in self.notes[seg.path]:
            self.notes[seg.path].append(damage)

    def _assess(self, seg: SegmentInfo, reader: SegmentReader | None, size: int | None) -> SegmentHealth:
        ledger = "manifest" if self.objects is not None and self.index.upload(seg.id) is not None else "index"
        return assess(seg, reader, size, notes=self.notes.get(seg.path, ()), ledger=ledger)

    def relpath(self, path: Path) -> str:
        """``path`` relative to the root, as stored in the index."""
        return path.relative_to(self.root).as_posix()

    def segments(self, flt: SegmentFilter | None = None) -> list[SegmentInfo]:
        """Matching segments, grouped by partition, each partition in write order."""
        return self.index.select(flt)

    def reader(self, seg: SegmentInfo, *, quiet: bool | None = None) -> SegmentReader:
        """A reader of ``seg``; an open segment is read only up to its last fsynced byte."""
        limit = seg.bytes if seg.status is Status.OPEN else None
        return SegmentReader(self.local(seg), limit=limit, quiet=self.quiet if quiet is None else quiet)

    def check(self, seg: SegmentInfo) -> SegmentHealth | None:
        """Read all of ``seg`` and say what is unreadable; None when the segment left the index meanwhile."""
        reader = self.reader(seg, quiet=True)
        try:
            size = reader.path.stat().st_size
            reader.scan()
        except FileNotFoundError:
            return self._gone(seg)
        return self._assess(seg, reader, size)

    def check_all(self, flt: SegmentFilter | None = None) -> list[SegmentHealth]:
        """``check`` of every segment matching ``flt`` (all statuses unless it names some)."""
        return [h for h in map(self.check, self.segments(flt)) if h is not None]

    def _gone(self, seg: SegmentInfo) -> SegmentHealth | None:
        """The health of a segment whose file is missing: damage, unless cleanup or a split removed it."""
        now = self.index.get(seg.id)
        if now is None or now.path != seg.path:
            return None
        return self._assess(now, None, None)

    def records(self, flt: SegmentFilter | None = None) -> Iterator[Entry]:
        """Live (open or sealed, unless ``flt.statuses`` says otherwise) records in ``flt``'s window,
        partition by partition, each in write order."""
        for item in self._scan(self.segments(_live(flt)), flt or SegmentFilter()):
            if isinstance(item, Entry):
                yield item

    def merged(
        self, flt: SegmentFilter | None = None, segments: Sequence[SegmentInfo] | None = None
    ) -> Iterator[Entry | SegmentEnd]:
        """Records of every matching partition in global write order (lsn), with segment ends.

        ``segments`` (as ``segments(flt)`` returns them) restricts the read to those files.
        """
        flt = flt or SegmentFilter()
        by_part: dict[object, list[SegmentInfo]] = {}
        for seg in self.segments(_live(flt)) if segments is None else segments:
            by_part.setdefault(seg.partition, []).append(seg)
        streams = [self._keyed(self._scan(segs, flt)) for segs in by_part.values()]
        for _, item in heapq.merge(*streams, key=lambda kv: kv[0]):
            yield item

    def ordered(self, flt: SegmentFilter | None = None) -> Iterator[Entry]:
        """The records of ``merged``, without the segment ends."""
        return (item for item in self.merged(flt) if isinstance(item, Entry))

    def _scan(self, segs: Iterable[SegmentInfo], flt: SegmentFilter) -> Iterator[Entry | SegmentEnd]:
        for seg in segs:
            reader, selected = self.reader(seg), 0
            try:
                size = reader.path.stat().st_size
                for lsn, rec in reader:
                    if flt.in_window(rec.parked_at):
                        selected += 1
                        yield Entry(seg, lsn, rec)
            except FileNotFoundError:
                health = self._gone(seg)
                if health is not None:
                    yield SegmentEnd(seg, 0, 0, health)
                continue
            yield SegmentEnd(seg, reader.count, selected, self._assess(seg, reader, size))

    @staticmethod
    def _keyed(items: Iterator[Entry | SegmentEnd]) -> Iterator[tuple[tuple[int, int], Entry | SegmentEnd]]:
        last = -1
        for item in items:
            if isinstance(item, Entry):
                last = item.lsn
                yield (last, 0), item
            else:
                yield (last, 1), item

    @contextmanager
    def exclusive(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold ``ops.lock``: one replay, discard, cleanup or upload pass at a time per root.

        Yields True once held; with ``wait=False`` yields False at once when another holds it.
        """
        fd = os.open(self.root / "ops.lock", os.O_RDWR | os.O_CREAT, 0o640)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close the index."""
        self.index.close()


def _live(flt: SegmentFilter | None) -> SegmentFilter:
    flt = flt or SegmentFilter()
    return flt if flt.statuses is not None else replace(flt, statuses=LIVE)
