"""The SQLite backend of both coordination contracts (the embedded default): checkpoints and lock domains.

Both live in tables of one SQLite file, opened in WAL mode with
``synchronous=FULL``; every write is one ``BEGIN IMMEDIATE`` transaction, so
processes sharing the file see one order and each compare-and-set is atomic
across connections.

The lock of a domain is a lease renewed by its holder: a row ``(holder,
token, expires_at)``. Taking it needs the row free or its lease expired, and
bumps ``token``; the holder's process renews the lease every ``lease/3``
seconds from a thread, so a holder killed with SIGKILL keeps the lock at most
``lease`` seconds more. The last-runner swap checks the lease in the same
transaction (a holder whose lease expired cannot record itself). Leases
compare wall-clock times: the processes must share a clock (one host).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
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
from framework.coordination.locks import (
    DomainLocks,
    DomainStatus,
    LastRunner,
    LastRunnerConflict,
    Lease,
    LeaseLost,
    LocksUnavailable,
    Member,
    check_job_name,
)

__all__ = ["SqliteCheckpointStore", "SqliteDomainLocks", "DEFAULT_LEASE"]

T = TypeVar("T")


def _connect(path: str) -> sqlite3.Connection:
    """A connection in autocommit mode that threads may share (callers serialise its use)."""
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)


def _prepare(db: sqlite3.Connection, ddl: tuple[str, ...]) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    for statement in ddl:
        db.execute(statement)


def _transaction(db: sqlite3.Connection, fn: Callable[[], T]) -> T:
    """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction (rolled back when it raises)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return result


_CHECKPOINTS_DDL = (
    "CREATE TABLE IF NOT EXISTS converge_checkpoints ("
    " name TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL) WITHOUT ROWID",
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
        self._db = _connect(self.path)
        _prepare(self._db, _CHECKPOINTS_DDL)
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
            return self._guard(lambda: _transaction(self._db, lambda: self._cas(name, value, expected)))

    def _cas(self, name: str, value: str, expected: int | None) -> Checkpoint:
        row = self._db.execute(_GET, (name,)).fetchone()
        actual = None if row is None else row[1]
        if actual != expected:
            raise CheckpointConflict(name, expected, actual)
        if expected is None:
            self._db.execute(_INSERT, (name, value))
        else:
            self._db.execute(_UPDATE, (value, name, expected))
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


#: Seconds a holder keeps the lock without renewing it.
DEFAULT_LEASE = 10.0

_LOCKS_DDL = (
    "CREATE TABLE IF NOT EXISTS converge_job_locks (domain TEXT PRIMARY KEY, holder TEXT,"
    " token INTEGER NOT NULL, expires_at REAL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS converge_job_last (domain TEXT PRIMARY KEY, value TEXT NOT NULL,"
    " version INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS converge_job_members (domain TEXT NOT NULL, job TEXT NOT NULL,"
    " predecessor TEXT, start_with TEXT, PRIMARY KEY (domain, job)) WITHOUT ROWID",
)
_LOCK_ROW = "SELECT holder, token, expires_at FROM converge_job_locks WHERE domain = ?"
_TAKE = (
    "INSERT INTO converge_job_locks (domain, holder, token, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (domain) DO UPDATE SET holder = excluded.holder, token = excluded.token,"
    " expires_at = excluded.expires_at"
)
_RENEW = (
    "UPDATE converge_job_locks SET expires_at = ? WHERE domain = ? AND holder = ? AND token = ?"
    " AND expires_at > ?"
)
_RELEASE = (
    "UPDATE converge_job_locks SET holder = NULL, expires_at = NULL WHERE domain = ? AND holder = ?"
    " AND token = ?"
)
_LAST = "SELECT value, version FROM converge_job_last WHERE domain = ?"
_LAST_INSERT = "INSERT INTO converge_job_last (domain, value, version) VALUES (?, ?, 0)"
_LAST_UPDATE = (
    "UPDATE converge_job_last SET value = ?, version = version + 1 WHERE domain = ? AND version = ?"
)
_DECLARE = (
    "INSERT INTO converge_job_members (domain, job, predecessor, start_with) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (domain, job) DO UPDATE SET predecessor = excluded.predecessor,"
    " start_with = excluded.start_with"
)
_MEMBERS = "SELECT job, predecessor, start_with FROM converge_job_members WHERE domain = ? ORDER BY job"
_DOMAINS = (
    "SELECT domain FROM converge_job_locks UNION SELECT domain FROM converge_job_last"
    " UNION SELECT domain FROM converge_job_members ORDER BY 1"
)


class SqliteDomainLocks(DomainLocks):
    """Lock domains in the SQLite file ``path``, leases of ``lease`` seconds renewed from a thread."""

    def __init__(self, path: str | os.PathLike[str], *, lease: float = DEFAULT_LEASE) -> None:
        if not lease > 0:
            raise ValueError(f"lease must be > 0 seconds, got {lease!r}")
        self.path = os.fspath(path)
        self.lease = float(lease)
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], Lease] = {}
        self._held_lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._db = _connect(self.path)
        self._guard(lambda: _prepare(self._db, _LOCKS_DDL))
        self._renewer = threading.Thread(target=self._renew_loop, name="converge-lease-renewer", daemon=True)
        self._renewer.start()

    def _guard(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise LocksUnavailable("the lock store is closed")
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                raise LocksUnavailable(f"sqlite job locks: {exc}") from exc

    def _write(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in one transaction, connection trouble becoming LocksUnavailable."""
        return self._guard(lambda: _transaction(self._db, fn))

    def try_acquire(self, domain: str, holder: str) -> Lease | None:
        check_job_name(domain, "domain")

        def take() -> Lease | None:
            now = time.time()
            row = self._db.execute(_LOCK_ROW, (domain,)).fetchone()
            if row is not None and row[0] is not None and row[2] is not None and row[2] > now:
                return None
            token = 1 if row is None else row[1] + 1
            self._db.execute(_TAKE, (domain, holder, token, now + self.lease))
            return Lease(domain, holder, str(token))

        lease = self._write(take)
        if lease is not None:
            with self._held_lock:
                self._held[(lease.domain, lease.token)] = lease
        return lease

    def _forget(self, lease: Lease) -> None:
        with self._held_lock:
            self._held.pop((lease.domain, lease.token), None)

    def _leases(self) -> list[Lease]:
        with self._held_lock:
            return list(self._held.values())

    def _owns(self, lease: Lease, now: float) -> bool:
        row = self._db.execute(_LOCK_ROW, (lease.domain,)).fetchone()
        return (
            row is not None
            and row[0] == lease.holder
            and str(row[1]) == lease.token
            and row[2] is not None
            and row[2] > now
        )

    def held(self, lease: Lease) -> bool:
        return self._guard(lambda: self._owns(lease, time.time()))

    def renew(self, lease: Lease) -> bool:
        """Extend ``lease`` by ``lease`` seconds from now; False when it was already lost."""

        def run() -> bool:
            now = time.time()
            args = (now + self.lease, lease.domain, lease.holder, int(lease.token), now)
            cur = self._db.execute(_RENEW, args)
            return cur.rowcount == 1

        renewed = self._write(run)
        if not renewed:
            self._forget(lease)
        return renewed

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease / 3):
            for lease in self._leases():
                try:
                    self.renew(lease)
                except LocksUnavailable:
                    pass  # retried at the next tick; the lease may expire meanwhile

    def release(self, lease: Lease) -> None:
        self._forget(lease)
        self._write(lambda: self._db.execute(_RELEASE, (lease.domain, lease.holder, int(lease.token))))

    def _read_last(self, domain: str) -> LastRunner | None:
        row = self._db.execute(_LAST, (domain,)).fetchone()
        return None if row is None else LastRunner.decode(row[0], row[1])

    def last_runner(self, domain: str) -> LastRunner | None:
        check_job_name(domain, "domain")
        return self._guard(lambda: self._read_last(domain))

    def swap_last_runner(self, lease: Lease, runner: LastRunner, expected_version: int | None) -> LastRunner:
        def swap() -> LastRunner:
            if not self._owns(lease, time.time()):
                raise LeaseLost(f"domain {lease.domain!r}: {lease.holder} no longer holds the lock")
            current = self._read_last(lease.domain)
            actual = None if current is None else current.version
            if actual != expected_version:
                raise LastRunnerConflict(lease.domain, expected_version, actual)
            if expected_version is None:
                self._db.execute(_LAST_INSERT, (lease.domain, runner.encode()))
                return LastRunner.decode(runner.encode(), 0)
            self._db.execute(_LAST_UPDATE, (runner.encode(), lease.domain, expected_version))
            return LastRunner.decode(runner.encode(), expected_version + 1)

        return self._write(swap)

    def declare(self, domain: str, member: Member) -> None:
        check_job_name(domain, "domain")
        args = (domain, check_job_name(member.job, "job"), member.predecessor, member.start_with)
        self._write(lambda: self._db.execute(_DECLARE, args))

    def domains(self) -> list[str]:
        return self._guard(lambda: [r[0] for r in self._db.execute(_DOMAINS).fetchall()])

    def status(self, domain: str) -> DomainStatus:
        check_job_name(domain, "domain")

        def read() -> DomainStatus:
            row = self._db.execute(_LOCK_ROW, (domain,)).fetchone()
            members = [Member(*r) for r in self._db.execute(_MEMBERS, (domain,)).fetchall()]
            holders: list[str] = []
            expired = None
            if row is not None and row[0] is not None:
                if row[2] is not None and row[2] > time.time():
                    holders.append(row[0])
                else:
                    expired = row[0]
            return DomainStatus(domain, holders, self._read_last(domain), members, expired)

        return self._guard(read)

    def close(self) -> None:
        self._stop.set()
        if self._renewer.is_alive() and self._renewer is not threading.current_thread():
            self._renewer.join()
        for lease in self._leases():
            try:
                self.release(lease)
            except LocksUnavailable:
                pass
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()
