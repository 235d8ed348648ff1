"""Checkpoints in ZooKeeper (kazoo): one znode per checkpoint, CAS on the znode version.

Checkpoint names map to flat children of ``root`` (``/`` in a name becomes
``%``), so a checkpoint ``a`` and a checkpoint ``a/b`` are independent
znodes, as in the SQLite backend. The znode version is the checkpoint
version: 0 on create, +1 on each conditional ``set``. Writes are never
retried blindly after a connection loss (the outcome is unknown); the caller
gets ``CheckpointUnavailable`` and re-reads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from framework.coordination import kazoo_client
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

__all__ = ["ZooKeeperCheckpointStore"]

T = TypeVar("T")
DEFAULT_ROOT = "/converge/checkpoints"


def _check_root(root: str) -> str:
    if not root.startswith("/") or root.endswith("/") or "//" in root:
        raise CheckpointError(f"ZooKeeper root must be an absolute path without trailing '/': {root!r}")
    check_name(root[1:])
    return root


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
        self.root = _check_root(root)
        self.hosts = hosts
        self._lock = threading.Lock()
        self._closed = False
        self._client = kazoo_client.connect(
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
        return kazoo_client.call(fn, self.hosts, CheckpointUnavailable)

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
