"""A durable record of messages the runtime could not process (parked, never dropped)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FailedEvent", "FailedEventStore"]

_DDL = """
CREATE TABLE IF NOT EXISTS failed_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    "offset" INTEGER NOT NULL,
    key BLOB,
    value BLOB,
    stage TEXT NOT NULL,
    error_class TEXT NOT NULL,
    error TEXT NOT NULL,
    parked_at REAL NOT NULL
)
"""


@dataclass(frozen=True)
class FailedEvent:
    """A parked message with where it came from and why it failed."""

    pipeline: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    stage: str
    error_class: str
    error: str
    parked_at: float = 0.0


class FailedEventStore:
    """Append-only SQLite file of failed messages; a record is on disk before ``park`` returns."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_DDL)

    def park_sync(self, ev: FailedEvent) -> None:
        with self._lock:
            self._db.execute(
                'INSERT INTO failed_events (pipeline, topic, partition, "offset", key, value, stage,'
                " error_class, error, parked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ev.pipeline, ev.topic, ev.partition, ev.offset, ev.key, ev.value, ev.stage,
                 ev.error_class, ev.error[:4000], ev.parked_at or time.time()),
            )  # fmt: skip

    async def park(self, ev: FailedEvent) -> None:
        """Record ``ev`` durably (synchronous=FULL commit) off the event loop."""
        await asyncio.to_thread(self.park_sync, ev)

    def all(self) -> list[FailedEvent]:
        with self._lock:
            rows = self._db.execute(
                'SELECT pipeline, topic, partition, "offset", key, value, stage, error_class, error,'
                " parked_at FROM failed_events ORDER BY id"
            ).fetchall()
        return [FailedEvent(*r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
