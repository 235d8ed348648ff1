"""Checkpoints in one SQLite file: the embedded default backend."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from framework.coordination.checkpoints import (
    BlockingCheckpointStore,
    Checkpoint,
    CheckpointConflict,
    CheckpointUnavailable,
    check_expected,
    check_name,
    check_value,
)

__all__ = ["SqliteCheckpointStore"]

T = TypeVar("T")

_DDL = (
    "CREATE TABLE IF NOT EXISTS converge_checkpoints ("
    " name TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL) WITHOUT ROWID"
)
_GET = "SELECT value, version FROM converge_checkpoints WHERE name = ?"
_INSERT = "INSERT INTO converge_checkpoints (name, value, version) VALUES (?, ?, 0)"
_UPDATE = "UPDATE converge_checkpoints SET value = ?, version = version + 1 WHERE name = ? AND version = ?"


class SqliteCheckpointStore(BlockingCheckpointStore):
    """Checkpoints in a SQLite table; each write is one durable (synchronous=FULL) transaction.

    Several processes may share the file: the compare-and-set runs inside a
    ``BEGIN IMMEDIATE`` transaction, so it is atomic across connections.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_DDL)
        self._closed = False

    def get_sync(self, name: str) -> Checkpoint | None:
        """Blocking ``get``."""
        check_name(name)
        with self._lock:
            self._check_open()
            row = self._guard(lambda: self._db.execute(_GET, (name,)).fetchone())
        return None if row is None else Checkpoint(name, row[0], row[1])

    def compare_and_set_sync(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        """Blocking ``compare_and_set``."""
        check_name(name)
        check_value(value)
        expected = check_expected(expected_version)
        with self._lock:
            self._check_open()
            return self._guard(lambda: self._cas(name, value, expected))

    def _cas(self, name: str, value: str, expected: int | None) -> Checkpoint:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute(_GET, (name,)).fetchone()
            actual = None if row is None else row[1]
            if actual != expected:
                raise CheckpointConflict(name, expected, actual)
            if expected is None:
                self._db.execute(_INSERT, (name, value))
            else:
                self._db.execute(_UPDATE, (value, name, expected))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return Checkpoint(name, value, 0 if expected is None else expected + 1)

    @staticmethod
    def _guard(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            raise CheckpointUnavailable(f"sqlite checkpoints: {exc}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise CheckpointUnavailable("the checkpoint store is closed")

    async def get(self, name: str) -> Checkpoint | None:
        return await asyncio.to_thread(self.get_sync, name)

    async def compare_and_set(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        return await asyncio.to_thread(self.compare_and_set_sync, name, value, expected_version)

    def close_sync(self) -> None:
        """Blocking ``close``."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)
