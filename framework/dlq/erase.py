"""Removing records from the WAL and from export files for good (a data subject's erasure).

``drop_records`` rewrites every segment holding a matching record without
it, the way ``lifecycle`` splits a segment: the kept records (same lsns,
same status) go to a new, fsynced file, the index swaps the old row for the
new one in one transaction, and only then is the old file unlinked. A crash
leaves either the old row (the erasure is simply run again) or the new one
with the old file unindexed; the next ``drop_records`` deletes unindexed
segment files that hold a matching record (converge never reads them, and
their records are in the indexed copy). Open segments of a live writer and
damaged segments are never rewritten: they are counted (``held_open``,
``damaged``) so the caller can report that the erasure is incomplete.
``scrub_export`` rewrites an export file without the matching records
through an exclusive temporary file renamed over it. ``drop_parked`` runs
``drop_records`` on a local root and on every host's uploaded segments
(``bucket.py``), the latter under a lease per rewritten segment.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from framework.dlq.bucket import BucketView
from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter, SegmentInfo, Status
from framework.dlq.lifecycle import _Part, _prune, _swap
from framework.dlq.record import ParkedRecord
from framework.dlq.segment import SegmentReader, fsync_dir
from framework.dlq.store import DeadLetterStore
from framework.dlq.wal import seal_abandoned
from stores.objects.store import ObjectStore

__all__ = ["Dropped", "drop_records", "drop_parked", "parked_stores", "matching_records", "scrub_export",
           "export_files"]  # fmt: skip

Match = Callable[[ParkedRecord], bool]


@dataclass
class Dropped:
    """What ``drop_records`` did: records removed, segments rewritten, unindexed files deleted, and
    what it could not touch (records in a live writer's open segments, damaged segments)."""

    records: int = 0
    segments: int = 0
    orphans: int = 0
    held_open: int = 0
    damaged: list[SegmentHealth] = field(default_factory=list)

    def add(self, other: Dropped) -> None:
        """Add the counts of ``other`` to these."""
        self.records += other.records
        self.segments += other.segments
        self.orphans += other.orphans
        self.held_open += other.held_open
        self.damaged += other.damaged


def matching_records(store: DeadLetterStore, matches: Match) -> Iterator[tuple[str, int]]:
    """``(segment path, lsn)`` of every readable record ``matches`` selects, in every segment of
    every status and in unindexed segment files."""
    for seg in store.segments(SegmentFilter(statuses=tuple(Status))):
        try:
            for lsn, rec in store.reader(seg, quiet=True):
                if matches(rec):
                    yield seg.path, lsn
        except FileNotFoundError:
            continue
    for path in _orphans(store):
        for lsn, rec in SegmentReader(path, quiet=True):
            if matches(rec):
                yield store.relpath(path), lsn


def _orphans(store: DeadLetterStore) -> list[Path]:
    indexed = store.index.paths()
    return sorted(p for p in store.segments_root.rglob("*.seg") if store.relpath(p) not in indexed)


def _rewrite(store: DeadLetterStore, seg: SegmentInfo, kept: _Part) -> bool:
    """Swap ``seg`` for a segment of the ``kept`` records (none: just drop it); False if it changed."""
    swapped, _ = _swap(store, seg, kept)
    if swapped:
        original = store.abspath(seg)
        original.unlink(missing_ok=True)
        fsync_dir(original.parent)
        _prune(store, original.parent)
    return swapped


def drop_records(store: DeadLetterStore, matches: Match, *, dry_run: bool = False) -> Dropped:
    """Remove every record ``matches`` selects from the WAL (see the module docstring)."""
    out = Dropped()
    if not dry_run:
        seal_abandoned(store)  # a dead writer's open segments become rewritable
    with store.exclusive():
        for seg in store.segments(SegmentFilter(statuses=tuple(Status))):
            health = store.check(seg)
            if health is None:
                continue
            taken, kept = _Part(), _Part()
            for lsn, rec in store.reader(seg, quiet=True):
                (taken if matches(rec) else kept).add(lsn, rec)
            if not taken.lines:
                continue
            if seg.status is Status.OPEN:
                out.held_open += len(taken.lines)
                continue
            if health.damaged:
                out.damaged.append(health)
                continue
            if dry_run or _rewrite(store, seg, kept):
                out.records += len(taken.lines)
                out.segments += 1
        for path in _orphans(store):
            if any(matches(rec) for _, rec in SegmentReader(path, quiet=True)):
                out.orphans += 1
                if not dry_run:
                    path.unlink(missing_ok=True)
                    fsync_dir(path.parent)
    return out


@contextmanager
def parked_stores(root: str | Path | None, objects: ObjectStore | None) -> Iterator[list[DeadLetterStore]]:
    """The local WAL at ``root`` (when it exists) and the mirror of every host's uploaded segments."""
    with ExitStack() as stack:
        stores = []
        if root is not None and Path(root).exists():
            local = DeadLetterStore(root, quiet=True)
            stack.callback(local.close)
            stores.append(local)
        if objects is not None:
            stores.append(stack.enter_context(BucketView(objects)).store)
        yield stores


def drop_parked(
    root: str | Path | None, objects: ObjectStore | None, matches: Match, *, dry_run: bool = False
) -> Dropped:
    """``drop_records`` on the local WAL at ``root`` and on the uploaded segments in ``objects``.

    Uploaded segments holding a match are leased, rewritten and published (``bucket.py``); one
    that another command holds the lease of counts in ``held_open`` (run the erasure again).
    """
    out = Dropped()
    if root is not None and Path(root).exists():
        local = DeadLetterStore(root, quiet=True)
        try:
            out.add(drop_records(local, matches, dry_run=dry_run))
        finally:
            local.close()
    if objects is None:
        return out
    with BucketView(objects) as view:
        if dry_run:
            out.add(drop_records(view.store, matches, dry_run=True))
            return out
        names = sorted({path for path, _ in matching_records(view.store, matches)})
        if names:
            with view.claim(names=names) as claim:
                out.add(drop_records(claim.store, matches))
                out.held_open += len(claim.busy)
    return out


def export_files(path: str | Path) -> list[Path]:
    """``path`` itself, or every regular file under a directory ``path`` that is an export file."""
    from framework.dlq.export import EXPORT_FORMAT

    p = Path(path)
    if not p.is_dir():
        return [p]
    found = []
    for f in sorted(x for x in p.rglob("*") if x.is_file() and not x.name.startswith(".")):
        with open(f, "rb") as fh:
            if EXPORT_FORMAT.encode() in fh.readline(4096):
                found.append(f)
    return found


def scrub_export(path: str | Path, matches: Match, *, dry_run: bool = False) -> int:
    """Rewrite the export file ``path`` without the records ``matches`` selects; returns how many.

    The file is checked whole first (``ValueError`` naming a bad line, nothing changed); the
    other lines are kept byte for byte.
    """
    from framework.dlq.export import read_export

    drop = {n for n, (_, rec) in enumerate(read_export(path)) if matches(rec)}
    if not drop or dry_run:
        return len(drop)
    target = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        with open(target, encoding="utf-8") as src, os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(src.readline())
            n = 0
            for line in src:
                if not line.strip():
                    continue
                if n not in drop:
                    out.write(line)
                n += 1
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return len(drop)
