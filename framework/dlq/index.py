"""The SQLite index of segment files: partition, path, counters, time range and status."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from framework.dlq.names import label
from framework.dlq.record import Partition

__all__ = ["Status", "SegmentInfo", "SegmentFilter", "SegmentIndex", "NewSegment", "Upload"]

_DDL = """
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline TEXT NOT NULL,
    event_type TEXT NOT NULL,
    stage TEXT NOT NULL,
    error_class TEXT NOT NULL,
    path TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('open', 'sealed', 'replayed', 'discarded')),
    count INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    first_ts REAL,
    last_ts REAL,
    first_lsn INTEGER,
    last_lsn INTEGER,
    created_at REAL NOT NULL,
    status_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS segments_partition
    ON segments (pipeline, event_type, stage, error_class, first_lsn);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS uploads (
    segment_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    uploaded_at REAL NOT NULL
);
"""

_COLS = ("id, pipeline, event_type, stage, error_class, path, status, count, bytes, first_ts, last_ts,"
         " first_lsn, last_lsn, created_at, status_at")  # fmt: skip


class Status(StrEnum):
    """Life cycle of a segment: open -> sealed -> replayed | discarded."""

    OPEN = "open"
    SEALED = "sealed"
    REPLAYED = "replayed"
    DISCARDED = "discarded"


@dataclass(frozen=True)
class SegmentInfo:
    """One row of the index; ``path`` is relative to the WAL root, ``bytes`` is the file size."""

    id: int
    partition: Partition
    path: str
    status: Status
    count: int
    bytes: int
    first_ts: float | None
    last_ts: float | None
    first_lsn: int | None
    last_lsn: int | None
    created_at: float
    status_at: float

    @classmethod
    def from_row(cls, r: Sequence[Any]) -> SegmentInfo:
        return cls(r[0], Partition(*r[1:5]), r[5], Status(r[6]), *r[7:15])


@dataclass(frozen=True)
class NewSegment:
    """Counters of a segment file about to be indexed."""

    partition: Partition
    path: str
    status: Status
    count: int
    bytes: int
    first_ts: float | None
    last_ts: float | None
    first_lsn: int | None
    last_lsn: int | None
    created_at: float


@dataclass(frozen=True)
class SegmentFilter:
    """Which segments to select: exact partition labels, overlap with ``[since, until)``, statuses."""

    pipeline: str | None = None
    event_type: str | None = None
    stage: str | None = None
    error_class: str | None = None
    since: float | None = None
    until: float | None = None
    statuses: tuple[Status, ...] | None = None

    def where(self) -> tuple[str, list[Any]]:
        """An SQL condition and its parameters."""
        conds: list[str] = ["1=1"]
        params: list[Any] = []
        for name in ("pipeline", "event_type", "stage", "error_class"):
            v = getattr(self, name)
            if v is not None:
                conds.append(f"{name} = ?")
                params.append(label(v))
        if self.since is not None:
            conds.append("last_ts >= ?")
            params.append(self.since)
        if self.until is not None:
            conds.append("first_ts < ?")
            params.append(self.until)
        if self.statuses is not None:
            conds.append(f"status IN ({', '.join('?' * len(self.statuses))})")
            params.extend(s.value for s in self.statuses)
        return " AND ".join(conds), params

    def in_window(self, ts: float) -> bool:
        """Whether a record parked at ``ts`` falls in ``[since, until)``."""
        return (self.since is None or ts >= self.since) and (self.until is None or ts < self.until)


@dataclass(frozen=True)
class Upload:
    """Where a segment of a scratch root (``bucket.py``) is in object storage: object name, size, SHA-256."""

    segment_id: int
    name: str
    bytes: int
    sha256: str
    uploaded_at: float


class SegmentIndex:
    """Thread-safe access to ``index.sqlite3``; every change is committed with ``synchronous=FULL``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_DDL)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def insert(self, seg: NewSegment, at: float) -> int:
        """Add a segment row; returns its id."""
        with self._tx() as db:
            return self._insert(db, seg, at)

    @staticmethod
    def _insert(db: sqlite3.Connection, seg: NewSegment, at: float) -> int:
        cur = db.execute(
            "INSERT INTO segments (pipeline, event_type, stage, error_class, path, status, count, bytes,"
            " first_ts, last_ts, first_lsn, last_lsn, created_at, status_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*(label(p) for p in seg.partition), seg.path, seg.status.value, seg.count, seg.bytes,
             seg.first_ts, seg.last_ts, seg.first_lsn, seg.last_lsn, seg.created_at, at),
        )  # fmt: skip
        return int(cur.lastrowid or 0)

    def update_open(self, seg_id: int, count: int, size: int, first_ts: float | None,
                    last_ts: float | None, first_lsn: int | None, last_lsn: int | None) -> None:  # fmt: skip
        """Record the durable counters of an open segment and the next free lsn."""
        with self._tx() as db:
            db.execute(
                "UPDATE segments SET count = ?, bytes = ?, first_ts = ?, last_ts = ?, first_lsn = ?,"
                " last_lsn = ? WHERE id = ?",
                (count, size, first_ts, last_ts, first_lsn, last_lsn, seg_id),
            )
            if last_lsn is not None:
                db.execute(
                    "INSERT INTO meta (name, value) VALUES ('next_lsn', ?)"
                    " ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
                    (last_lsn + 1,),
                )

    def next_lsn(self) -> int:
        """The lowest lsn not yet used by any indexed or once-indexed record."""
        with self._lock:
            meta = self._db.execute("SELECT value FROM meta WHERE name = 'next_lsn'").fetchone()
            top = self._db.execute("SELECT max(last_lsn) FROM segments").fetchone()[0]
        return max(meta[0] if meta else 1, (top or 0) + 1)

    def set_status(self, seg_id: int, new: Status, at: float, expect: Status) -> bool:
        """Move a segment from ``expect`` to ``new``; False when it was not in ``expect``."""
        with self._tx() as db:
            cur = db.execute("UPDATE segments SET status = ?, status_at = ? WHERE id = ? AND status = ?",
                             (new.value, at, seg_id, expect.value))  # fmt: skip
            return cur.rowcount == 1

    def replace(self, seg_id: int, expect: Status, new: Sequence[NewSegment], at: float) -> bool:
        """Atomically swap a segment in ``expect`` status for ``new`` rows; False if it was not."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM segments WHERE id = ? AND status = ?", (seg_id, expect.value))
            if cur.rowcount != 1:
                return False
            for seg in new:
                self._insert(db, seg, at)
            return True

    def delete(self, seg_id: int) -> None:
        """Forget a segment row."""
        with self._tx() as db:
            db.execute("DELETE FROM segments WHERE id = ?", (seg_id,))

    def get(self, seg_id: int) -> SegmentInfo | None:
        """The row of ``seg_id``."""
        with self._lock:
            r = self._db.execute(f"SELECT {_COLS} FROM segments WHERE id = ?", (seg_id,)).fetchone()  # noqa: S608
        return None if r is None else SegmentInfo.from_row(r)

    def select(self, flt: SegmentFilter | None = None) -> list[SegmentInfo]:
        """Matching segments grouped by partition, each partition in write order."""
        cond, params = (flt or SegmentFilter()).where()
        sql = (
            f"SELECT {_COLS} FROM segments WHERE {cond}"  # noqa: S608 - conditions are fixed strings
            " ORDER BY pipeline, event_type, stage, error_class, first_lsn IS NOT NULL, first_lsn, id"
        )
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [SegmentInfo.from_row(r) for r in rows]

    def record_upload(self, up: Upload) -> None:
        """Record where a segment's bytes are in object storage."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?)",
                       (up.segment_id, up.name, up.bytes, up.sha256, up.uploaded_at))  # fmt: skip

    def upload(self, seg_id: int) -> Upload | None:
        """The upload of segment ``seg_id``, if it has one."""
        with self._lock:
            r = self._db.execute("SELECT * FROM uploads WHERE segment_id = ?", (seg_id,)).fetchone()
        return None if r is None else Upload(*r)

    def paths(self) -> set[str]:
        """The relative paths of every indexed segment."""
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT path FROM segments")}

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
