"""The ZooKeeper backend (kazoo) of both coordination contracts: checkpoints and lock domains.

Both start their client with ``_start_client`` and map kazoo's errors with ``_kazoo_call``:
the node and version errors they handle pass through, any other kazoo error
or timeout becomes the contract's "unavailable" error.

Checkpoint names map to flat children of ``root`` (``/`` in a name becomes
``%``), so a checkpoint ``a`` and a checkpoint ``a/b`` are independent
znodes, as in the SQLite backend. The znode version is the checkpoint
version: 0 on create, +1 on each conditional ``set``. Writes are never
retried blindly after a connection loss (the outcome is unknown); the caller
gets ``CheckpointUnavailable`` and re-reads.

Lock domains: ``kazoo.recipe.lock.Lock`` and a versioned last-runner znode.
Layout under ``root`` (default ``/converge/jobs``), per domain ``D``:

- ``D/lock``: the kazoo lock; each contender is an ephemeral sequential
  znode holding its holder id, so a holder killed with SIGKILL loses the
  lock when the server expires its session (``session_timeout`` seconds
  after its last heartbeat);
- ``D/last``: the last runner (JSON); its znode version is the record's
  version. It is swapped in one multi-op transaction with a ``check`` of
  the holder's own lock znode: a holder whose session expired cannot
  record itself;
- ``D/members/JOB``: each declared job (JSON: predecessor, start_with).

A lease also counts as lost while the client is disconnected (SUSPENDED):
the session may be expiring on the server side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock
from kazoo.retry import KazooRetry

from framework.coordination.checkpoints import (
    BlockingCheckpointStore,
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    CheckpointUnavailable,
    check_expected,
    check_name,
    check_value,
)
from framework.coordination.locks import (
    DomainLocks,
    DomainStatus,
    JobLockError,
    LastRunner,
    LastRunnerConflict,
    Lease,
    LeaseLost,
    LocksUnavailable,
    Member,
    check_job_name,
)

__all__ = [
    "ZooKeeperCheckpointStore",
    "ZooKeeperDomainLocks",
    "DEFAULT_ROOT",
    "DEFAULT_JOBS_ROOT",
]

T = TypeVar("T")
#: Where checkpoints live when a URL or caller names no root.
DEFAULT_ROOT = "/converge/checkpoints"
#: Where lock domains live when a URL or caller names no root.
DEFAULT_JOBS_ROOT = "/converge/jobs"


def _check_root(root: str, error: type[Exception], check: Callable[[str], object]) -> str:
    """``root`` if it is an absolute znode path (``error`` otherwise) whose part after the first
    ``/`` passes ``check``."""
    if not root.startswith("/") or root.endswith("/") or "//" in root:
        raise error(f"ZooKeeper root must be an absolute path without trailing '/': {root!r}")
    check(root[1:])
    return root


def _check_jobs_root(path: str) -> None:
    for segment in path.split("/"):
        check_job_name(segment, "ZooKeeper root segment")


def _start_client(
    hosts: str,
    root: str,
    *,
    session_timeout: float,
    connect_timeout: float,
    retry: KazooRetry,
    unavailable: type[Exception],
    listener: Callable[[str], Any] | None = None,
) -> KazooClient:
    """A started client with ``root`` ensured; ``unavailable`` when no server answers in time."""
    client = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=retry)
    if listener is not None:
        client.add_listener(listener)
    try:
        client.start(timeout=connect_timeout)
        client.ensure_path(root)
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        raise unavailable(f"ZooKeeper {hosts}: {exc or type(exc).__name__}") from exc
    return client


def _kazoo_call(fn: Callable[[], T], hosts: str, unavailable: type[Exception]) -> T:
    """``fn()``; the node and version errors callers handle pass through, any other kazoo or
    timeout error becomes ``unavailable``."""
    try:
        return fn()
    except (NoNodeError, NodeExistsError, BadVersionError):
        raise
    except (KazooTimeoutError, KazooException) as exc:
        raise unavailable(f"ZooKeeper {hosts}: {exc or type(exc).__name__}") from exc


class ZooKeeperCheckpointStore(BlockingCheckpointStore):
    """Checkpoints under ``root`` on the ZooKeeper ensemble ``hosts`` (``h1:p1,h2:p2``).

    The constructor connects (waiting up to ``connect_timeout`` seconds) and
    raises ``CheckpointUnavailable`` when no server answers.
    """

    def __init__(
        self,
        hosts: str,
        *,
        root: str = DEFAULT_ROOT,
        connect_timeout: float = 10.0,
        session_timeout: float = 10.0,
    ) -> None:
        self.root = _check_root(root, CheckpointError, check_name)
        self.hosts = hosts
        self._lock = threading.Lock()
        self._closed = False
        self._client = _start_client(
            hosts,
            self.root,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            retry=KazooRetry(max_tries=3, delay=0.2, max_delay=1.0),
            unavailable=CheckpointUnavailable,
        )

    def _path(self, name: str) -> str:
        return f"{self.root}/{check_name(name).replace('/', '%')}"

    def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise CheckpointUnavailable("the checkpoint store is closed")
        return _kazoo_call(fn, self.hosts, CheckpointUnavailable)

    def get_sync(self, name: str) -> Checkpoint | None:
        """Blocking ``get``."""
        path = self._path(name)
        try:
            data, stat = self._call(lambda: self._client.get(path))
        except NoNodeError:
            return None
        return Checkpoint(name, data.decode("utf-8"), stat.version)

    def _actual(self, name: str) -> int | None:
        found = self.get_sync(name)
        return None if found is None else found.version

    def compare_and_set_sync(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        """Blocking ``compare_and_set``."""
        path = self._path(name)
        data = check_value(value).encode("utf-8")
        expected = check_expected(expected_version)
        if expected is None:
            try:
                self._call(lambda: self._client.create(path, data))
            except NodeExistsError:
                raise CheckpointConflict(name, None, self._actual(name)) from None
            return Checkpoint(name, value, 0)
        try:
            stat = self._call(lambda: self._client.set(path, data, version=expected))
        except (BadVersionError, NoNodeError):
            raise CheckpointConflict(name, expected, self._actual(name)) from None
        return Checkpoint(name, value, stat.version)

    async def get(self, name: str) -> Checkpoint | None:
        return await asyncio.to_thread(self.get_sync, name)

    async def compare_and_set(self, name: str, value: str, expected_version: int | None) -> Checkpoint:
        return await asyncio.to_thread(self.compare_and_set_sync, name, value, expected_version)

    def close_sync(self) -> None:
        """Blocking ``close``: ends the session and the client's threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._client.stop()
        self._client.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)


def _sequence(node: str) -> str:
    return node[-10:]


class ZooKeeperDomainLocks(DomainLocks):
    """Lock domains under ``root`` on the ensemble ``hosts`` (``h1:p1,h2:p2``).

    The constructor connects (waiting up to ``connect_timeout`` seconds) and
    raises ``LocksUnavailable`` when no server answers. ``session_timeout``
    bounds how long a killed holder keeps a lock.
    """

    def __init__(
        self,
        hosts: str,
        *,
        root: str = DEFAULT_JOBS_ROOT,
        session_timeout: float = 10.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.root = _check_root(root, JobLockError, _check_jobs_root)
        self.hosts = hosts
        self._op_timeout = session_timeout
        self._closed = False
        self._mutex = threading.Lock()
        self._locks: dict[str, Lock] = {}
        self._connected = False
        self._client = _start_client(
            hosts,
            self.root,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            unavailable=LocksUnavailable,
            listener=self._on_state,
        )
        self._connected = True

    def _on_state(self, state: str) -> None:
        self._connected = state == KazooState.CONNECTED
        if state == KazooState.LOST:
            with self._mutex:
                self._locks.clear()  # the ephemeral lock znodes are gone with the session

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` while connected; connection trouble becomes LocksUnavailable."""
        if self._closed:
            raise LocksUnavailable("the lock store is closed")
        if not self._connected:  # kazoo would queue the request until the connection is back
            raise LocksUnavailable(f"ZooKeeper {self.hosts}: not connected")
        return _kazoo_call(fn, self.hosts, LocksUnavailable)

    def _wait(self, start: Callable[[], Any]) -> Any:
        """The result of the async request ``start`` makes, waiting at most the session timeout."""
        return self._call(lambda: start().get(timeout=self._op_timeout))

    def _domain(self, domain: str) -> str:
        return f"{self.root}/{check_job_name(domain, 'domain')}"

    def try_acquire(self, domain: str, holder: str) -> Lease | None:
        lock = self._client.Lock(f"{self._domain(domain)}/lock", holder)
        if not self._call(lambda: lock.acquire(blocking=False)):
            return None
        lease = Lease(domain, holder, str(lock.node))
        with self._mutex:
            self._locks[lease.token] = lock
        return lease

    def held(self, lease: Lease) -> bool:
        if not self._connected:
            return False
        with self._mutex:
            if lease.token not in self._locks:
                return False
        path = f"{self._domain(lease.domain)}/lock/{lease.token}"
        try:
            return self._wait(lambda: self._client.exists_async(path)) is not None
        except LocksUnavailable:
            return False

    def release(self, lease: Lease) -> None:
        with self._mutex:
            lock = self._locks.pop(lease.token, None)
        if lock is not None and lock.node:
            deleted = self._client.delete_async(f"{lock.path}/{lock.node}")
            if self._connected:  # the next acquirer, in any session, finds the domain free
                with contextlib.suppress(Exception):  # gone already, or the reply is late: see below
                    deleted.get(timeout=self._op_timeout)
            # never waits while disconnected: the delete is queued for the same session, and a
            # session that expires takes the ephemeral znode with it

    def _read_last(self, domain: str) -> LastRunner | None:
        try:
            data, stat = self._wait(lambda: self._client.get_async(f"{self._domain(domain)}/last"))
        except NoNodeError:
            return None
        return LastRunner.decode(data.decode("utf-8"), stat.version)

    def last_runner(self, domain: str) -> LastRunner | None:
        return self._read_last(domain)

    def swap_last_runner(self, lease: Lease, runner: LastRunner, expected_version: int | None) -> LastRunner:
        base = self._domain(lease.domain)
        data = runner.encode().encode("utf-8")
        tx = self._client.transaction()
        tx.check(f"{base}/lock/{lease.token}", 0)
        if expected_version is None:
            tx.create(f"{base}/last", data)
        else:
            tx.set_data(f"{base}/last", data, version=expected_version)
        results: list[Any] = self._wait(tx.commit_async)
        if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise LeaseLost(f"domain {lease.domain!r}: {lease.holder} no longer holds the lock")
        if isinstance(results[1], Exception):
            current = self._read_last(lease.domain)
            actual = None if current is None else current.version
            raise LastRunnerConflict(lease.domain, expected_version, actual)
        version = 0 if expected_version is None else results[1].version
        return LastRunner.decode(runner.encode(), version)

    def declare(self, domain: str, member: Member) -> None:
        path = f"{self._domain(domain)}/members/{check_job_name(member.job, 'job')}"
        data = json.dumps({"predecessor": member.predecessor, "start_with": member.start_with}).encode()

        # set, else create; a runner declaring the same job at the same time may create the znode
        # between the two (NodeExistsError), or delete it: try again until one of them succeeds
        while True:
            try:
                self._wait(lambda: self._client.set_async(path, data))
                return
            except NoNodeError:
                pass
            try:
                self._wait(lambda: self._client.create_async(path, data, makepath=True))
                return
            except NodeExistsError:
                continue

    def domains(self) -> list[str]:
        return sorted(self._wait(lambda: self._client.get_children_async(self.root)))

    def _children(self, path: str) -> list[str]:
        try:
            return self._wait(lambda: self._client.get_children_async(path))
        except NoNodeError:
            return []

    def _data(self, path: str) -> bytes | None:
        try:
            data, _ = self._wait(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        return data

    def status(self, domain: str) -> DomainStatus:
        base = self._domain(domain)
        status = DomainStatus(domain, last=self._read_last(domain))
        for node in sorted(self._children(f"{base}/lock"), key=_sequence):
            data = self._data(f"{base}/lock/{node}")
            if data is not None:
                status.holders.append(data.decode("utf-8"))
        for job in sorted(self._children(f"{base}/members")):
            raw = self._data(f"{base}/members/{job}")
            if raw is not None:
                info = json.loads(raw)
                status.members.append(Member(job, info.get("predecessor"), info.get("start_with")))
        return status

    def close(self) -> None:
        """End the session: the server deletes its lock znodes at once (after the session timeout
        when it cannot be reached)."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._locks.clear()
        self._client.stop()
        self._client.close()
