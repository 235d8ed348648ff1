"""Fixtures: a real ZooKeeper for the session, and one checkpoint store per backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.coordination.zookeeper import ZooKeeperCheckpointStore
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server", "checkpoints", "reopen"]


def _open(kind: str, where: str, server: ZooKeeperServer | None) -> CheckpointStore:
    if kind == "sqlite":
        return SqliteCheckpointStore(where)
    assert server is not None
    return ZooKeeperCheckpointStore(server.hosts, root=where)


@pytest.fixture(params=["sqlite", "zookeeper"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, ZooKeeperServer | None]:
    """(kind, location, server): a fresh SQLite file or a fresh ZooKeeper root."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "checkpoints.db"), None
    server = request.getfixturevalue("zookeeper_server")
    return "zookeeper", f"/converge-test/{uuid.uuid4().hex}", server


@pytest.fixture()
def checkpoints(backend: tuple[str, str, ZooKeeperServer | None]) -> Iterator[CheckpointStore]:
    """A checkpoint store of the parametrised backend, closed at the end."""
    store = _open(*backend)
    try:
        yield store
    finally:
        store.close_sync()  # type: ignore[attr-defined]


@pytest.fixture()
def reopen(backend: tuple[str, str, ZooKeeperServer | None]) -> Iterator[object]:
    """A function opening another store on the same backend location (a second process's view)."""
    opened: list[CheckpointStore] = []

    def _reopen() -> CheckpointStore:
        opened.append(_open(*backend))
        return opened[-1]

    yield _reopen
    for store in opened:
        store.close_sync()  # type: ignore[attr-defined]
