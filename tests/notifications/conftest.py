"""Fixtures: a SQLite wide-column store with the notification tables, and checkpoint stores."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.coordination.zookeeper import ZooKeeperCheckpointStore
from framework.notifications import NOTIFICATION_TABLES
from stores.sqlite import SqliteStore
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server", "store", "checkpoints"]


class Clock:
    """A settable clock (epoch seconds) for the store's TTLs and the reader's horizon."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "wide.db", clock=clock)
    for schema in NOTIFICATION_TABLES:
        await s.ensure_table(schema)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(params=["sqlite", "zookeeper"])
def checkpoints(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    """A checkpoint store on SQLite, then on the real ZooKeeper."""
    if request.param == "sqlite":
        cp: CheckpointStore = SqliteCheckpointStore(tmp_path / "checkpoints.db")
    else:
        server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
        cp = ZooKeeperCheckpointStore(server.hosts, root=f"/converge-test/{uuid.uuid4().hex}")
    try:
        yield cp
    finally:
        cp.close_sync()  # type: ignore[attr-defined]
