"""The dead-letter write-ahead log the runtime parks events in.

``park`` appends one checksummed line to the open segment of the record's
partition, fsyncs it, updates the index, and only then returns: the runtime may
acknowledge the event's offset afterwards. One process writes a WAL root at a
time (``writer.lock``); readers and the ``converge dlq`` commands may run
alongside it. At start the writer seals the segments a crashed writer left open,
after recounting them from their files; a torn last line past the bytes the
index recorded as durable was never acknowledged (its event is redelivered), so
it is cut off rather than left as damage. Damage anywhere else stays in the
file and is reported (see ``health.py``).

With ``durability="uploaded"`` (and object storage) the async ``park`` returns only once
the record's segment is uploaded and verified: a group commit that seals the open segments
and runs one upload pass for every parker waiting at that moment.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from framework.core.errors import ConvergeError
from framework.dlq.group_commit import GroupCommit
from framework.dlq.index import NewSegment, SegmentFilter, SegmentInfo, Status
from framework.dlq.names import partition_dir
from framework.dlq.offload import offload, offload_quietly
from framework.dlq.record import ParkedRecord, Partition, record_to_json
from framework.dlq.segment import SegmentReader, SegmentWriter, encode_line
from framework.dlq.store import DeadLetterStore, Entry
from framework.settings import Durability
from stores.objects.store import ObjectStore

__all__ = ["Appended", "DeadLetterWAL", "WALLockedError", "recover_open", "seal_abandoned"]

log = logging.getLogger("framework.dlq")

DEFAULT_MAX_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SEGMENT_AGE_S = 3600.0


class WALLockedError(ConvergeError, RuntimeError):
    """Another live process is writing this WAL root."""


def _try_lock(root: Path) -> int | None:
    fd = os.open(root / "writer.lock", os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def _cut_torn_tail(path: Path, durable: int) -> SegmentReader:
    """Scan an open segment's file; cut off a torn tail that starts at or after ``durable`` bytes.

    Only unreadable bytes past the last good line and past what the index recorded as
    fsynced are cut: an append the writer never acknowledged.
    """
    r = SegmentReader(path).scan()
    tail = [d for d in r.damage if d.offset >= durable]
    if not tail or r.good_end > tail[0].offset:
        return r
    cut = tail[0].offset
    with open(path, "r+b") as f:
        f.truncate(cut)
        os.fsync(f.fileno())
    log.info("dead-letter WAL: cut %d bytes of an unacknowledged torn write off %s at offset %d",
             r.size - cut, path, cut)  # fmt: skip
    return SegmentReader(path, quiet=True).scan()


_N = TypeVar("_N", int, float)


def _lo(a: _N | None, b: _N | None) -> _N | None:
    return b if a is None else a if b is None else min(a, b)


def _hi(a: _N | None, b: _N | None) -> _N | None:
    return b if a is None else a if b is None else max(a, b)


def _recount_and_seal(store: DeadLetterStore, seg: SegmentInfo) -> int | None:
    """Seal an open segment with the counters of its file; returns its records (None if it was empty).

    The index row holds what the writer made durable: the file may hold one more record
    (fsynced, not yet indexed), but a file with fewer records or bytes than the row is
    damaged, and the row's counters are kept so the damage shows (see ``health.py``).
    """
    path = store.abspath(seg)
    r = _cut_torn_tail(path, seg.bytes)
    size = path.stat().st_size
    if size == 0 and seg.count == 0:  # crashed while writing the header: nothing was parked
        path.unlink()
        store.index.delete(seg.id)
        return None
    store.index.update_open(
        seg.id, max(r.count, seg.count), max(size, seg.bytes), _lo(r.first_ts, seg.first_ts),
        _hi(r.last_ts, seg.last_ts), _lo(r.first_lsn, seg.first_lsn), _hi(r.last_lsn, seg.last_lsn),
    )  # fmt: skip
    store.index.set_status(seg.id, Status.SEALED, store.clock(), expect=Status.OPEN)
    return r.count


def recover_open(store: DeadLetterStore) -> int:
    """Recount and seal every open segment (call only while holding the writer lock); returns how many."""
    n = 0
    for seg in store.segments(SegmentFilter(statuses=(Status.OPEN,))):
        path = store.abspath(seg)
        if not path.exists():  # crashed between indexing and creating the file: nothing was parked
            store.index.delete(seg.id)
            continue
        count = _recount_and_seal(store, seg)
        if count is not None:
            log.info("dead-letter WAL: sealed %s left open (%d records)", seg.path, count)
            n += 1
    return n


def seal_abandoned(store: DeadLetterStore) -> bool:
    """Seal segments left open by a dead writer, unless a live writer holds the root; True if done."""
    fd = _try_lock(store.root)
    if fd is None:
        return False
    try:
        recover_open(store)
    finally:
        os.close(fd)
    return True


@dataclass(frozen=True)
class Appended:
    """Where ``append_sync`` put a record: its log sequence number and its segment's id."""

    lsn: int
    segment_id: int


@dataclass
class _Open:
    id: int
    path: Path
    writer: SegmentWriter
    created_at: float
    count: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    first_lsn: int | None = None
    last_lsn: int | None = None


class DeadLetterWAL:
    """Durable parking of events, partitioned by (pipeline, event type, stage, error class).

    ``durability`` says when the async ``park`` returns, so when the runtime may acknowledge:

    - ``local`` (default): once the record is fsynced in the open segment. Parking costs one
      fsync; the records of segments not uploaded yet (all of them without ``objects``) are
      lost with the host's disk.
    - ``uploaded`` (needs ``objects``): once the segment holding the record is uploaded and
      verified. Parkers share flushes: one seals every open segment holding records and runs
      one ``offload`` pass, so each flush costs a put and a head per partition with records,
      and leaves many small segments. Parking slows to the object store's latency; while the
      store is unreachable a flush is retried (backoff from 0.1 s to 5 s) and parking waits,
      so the partitions that park stop progressing, as during a sink outage; nothing is
      dropped. ``park_sync`` keeps the local contract.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES,
        max_segment_age_s: float = DEFAULT_MAX_SEGMENT_AGE_S,
        clock: Callable[[], float] = time.time,
        lock_timeout_s: float = 30.0,
        objects: ObjectStore | None = None,
        durability: Durability = "local",
    ) -> None:
        if durability not in ("local", "uploaded"):
            raise ValueError(f"dead-letter WAL durability: 'local' or 'uploaded', not {durability!r}")
        if durability == "uploaded" and objects is None:
            raise ValueError("dead-letter WAL durability 'uploaded' needs object storage (objects)")
        self.durability = durability
        self.store = DeadLetterStore(root, clock=clock, objects=objects)
        self.root = self.store.root
        self.max_segment_bytes = max_segment_bytes
        self.max_segment_age_s = max_segment_age_s
        self.clock = clock
        self._lock_fd = self._acquire(lock_timeout_s)
        self._mutex = threading.Lock()
        self._open: dict[Partition, _Open] = {}
        self._flushing = threading.Lock()  # one upload pass at a time (flush, rotate, close)
        self.group: GroupCommit | None = None
        if objects is not None and durability == "uploaded":
            self.group = GroupCommit(self.flush_sync, self.is_uploaded, target=objects.url,
                                     lock=str(self.root / "ops.lock"))  # fmt: skip
        try:
            recover_open(self.store)
            self._next_lsn = self.store.index.next_lsn()
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _acquire(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            fd = _try_lock(self.store.root)
            if fd is not None:
                return fd
            if time.monotonic() >= deadline:
                raise WALLockedError(f"another process is writing the dead-letter WAL at {self.store.root}")
            time.sleep(0.05)

    # -- writing ------------------------------------------------------------------
    async def park(self, record: ParkedRecord) -> None:
        """Append ``record`` durably (fsynced, indexed) without blocking the event loop; with
        ``durability="uploaded"``, return only once its segment is uploaded (``group_commit.py``)."""
        at = await asyncio.to_thread(self.append_sync, record)
        if self.group is not None:
            await self.group.wait(at.segment_id)

    def park_sync(self, record: ParkedRecord) -> int:
        """Append ``record`` durably (fsynced, indexed; never waits for an upload); returns its lsn."""
        return self.append_sync(record).lsn

    def append_sync(self, record: ParkedRecord) -> Appended:
        """Append ``record`` durably (fsynced, indexed); returns its lsn and its segment's id."""
        record.validate()
        now = self.clock()
        if not record.parked_at:
            record = replace(record, parked_at=now)
        part = record.partition_key
        with self._mutex:
            if self._lock_fd < 0:
                raise RuntimeError("dead-letter WAL is closed")
            self._seal_expired(now)
            lsn = self._next_lsn
            line = encode_line(record_to_json(record, lsn))
            seg = self._open.get(part)
            if seg is not None and seg.count and seg.writer.size + len(line) > self.max_segment_bytes:
                self._seal(part, now)
                seg = None
            if seg is None:
                seg = self._start(part, now)
            try:
                seg.writer.append(line)
            except BaseException:
                self._abandon(part, now)
                raise
            self._next_lsn = lsn + 1
            ts = record.parked_at
            seg.count += 1
            seg.first_lsn = lsn if seg.first_lsn is None else seg.first_lsn
            seg.last_lsn = lsn
            seg.first_ts = ts if seg.first_ts is None else min(seg.first_ts, ts)
            seg.last_ts = ts if seg.last_ts is None else max(seg.last_ts, ts)
            self.store.index.update_open(seg.id, seg.count, seg.writer.size, seg.first_ts, seg.last_ts,
                                         seg.first_lsn, seg.last_lsn)  # fmt: skip
            return Appended(lsn, seg.id)

    # -- durability "uploaded" ------------------------------------------------------
    def is_uploaded(self, seg_id: int) -> bool:
        """Segment ``seg_id`` left this root: the upload pass forgets a segment once it is uploaded
        and tracked. An erasure that rewrote it removes its row too: its parkers then return
        before the rewritten copy of their records is uploaded (by the next pass)."""
        return self.store.index.get(seg_id) is None

    def flush_sync(self) -> None:
        """Seal every open segment holding records, then run one ``offload`` pass (errors raised).

        The pass does nothing while another command holds the root's ``ops.lock``.
        """
        objects = self.store.objects
        if objects is None:
            raise RuntimeError("dead-letter WAL has no object storage to flush to")
        with self._flushing:
            with self._mutex:
                if self._lock_fd < 0:
                    raise RuntimeError("dead-letter WAL is closed")
                now = self.clock()
                for part in [p for p, seg in self._open.items() if seg.count]:
                    self._seal(part, now)
            offload(self.store, objects)

    def _start(self, part: Partition, now: float) -> _Open:
        name = f"{self._next_lsn:016d}-{uuid.uuid4().hex[:16]}.seg"
        path = partition_dir(self.store.segments_root, part) / name
        seg_id = self.store.index.insert(
            NewSegment(part, self.store.relpath(path), Status.OPEN, 0, 0, None, None, None, None, now), now
        )
        writer = SegmentWriter.create(path, part, now)
        self.store.index.update_open(seg_id, 0, writer.size, None, None, None, None)
        seg = _Open(seg_id, path, writer, now)
        self._open[part] = seg
        return seg

    def _seal(self, part: Partition, now: float) -> None:
        seg = self._open.pop(part)
        seg.writer.close()
        self.store.index.set_status(seg.id, Status.SEALED, now, expect=Status.OPEN)

    def _abandon(self, part: Partition, now: float) -> None:
        """After a failed append: recount the file, seal it, never append to it again."""
        seg = self._open.pop(part)
        seg.writer.close()
        try:
            info = self.store.index.get(seg.id)  # the counters of the last durable append
            if info is not None:
                _recount_and_seal(self.store, info)
        except Exception:  # the next start recovers it
            log.exception("dead-letter WAL: could not seal %s after a failed write", seg.path)

    def _seal_expired(self, now: float) -> int:
        expired = [p for p, s in self._open.items() if now - s.created_at >= self.max_segment_age_s]
        for part in expired:
            self._seal(part, now)
        return len(expired)

    def rotate_sync(self, *, force: bool = False) -> int:
        """Seal open segments older than ``max_segment_age_s`` (all of them with ``force``); returns how many.

        With object storage, then upload the sealed segments (``offload.py``; a failure is
        logged and retried by the next call).
        """
        with self._mutex:
            now = self.clock()
            if force:
                sealed = len(self._open)
                for part in list(self._open):
                    self._seal(part, now)
            else:
                sealed = self._seal_expired(now)
        if self.store.objects is not None:
            with self._flushing:
                offload_quietly(self.store, self.store.objects)
        return sealed

    async def rotate(self, *, force: bool = False) -> int:
        """``rotate_sync`` off the event loop; call it periodically so idle partitions get sealed."""
        return await asyncio.to_thread(self.rotate_sync, force=force)

    # -- reading ------------------------------------------------------------------
    def iterate(self, flt: SegmentFilter | None = None) -> Iterator[Entry]:
        """Live records per partition in write order (see ``DeadLetterStore.records``)."""
        return self.store.records(flt)

    def segments(self, flt: SegmentFilter | None = None) -> list[SegmentInfo]:
        """Index rows matching ``flt``."""
        return self.store.segments(flt)

    def close(self) -> None:
        """Seal every open segment, upload the sealed ones (with object storage), release the writer lock."""
        with self._flushing, self._mutex:
            if self._lock_fd < 0:
                return
            now = self.clock()
            for part in list(self._open):
                self._seal(part, now)
            if self.store.objects is not None:
                offload_quietly(self.store, self.store.objects)
            self.store.close()
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> DeadLetterWAL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
