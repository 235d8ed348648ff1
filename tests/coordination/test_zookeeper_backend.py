"""ZooKeeper-specific behaviour: unreachable ensembles, roots, the fixture's server hygiene."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from framework.coordination import CheckpointError, CheckpointUnavailable, open_checkpoint_store
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.coordination.zookeeper import ZooKeeperCheckpointStore
from framework.local_stack import free_port
from tests.support.zookeeper import ZooKeeperServer


def test_unreachable_ensemble_is_unavailable_not_a_hang() -> None:
    with pytest.raises(CheckpointUnavailable):
        ZooKeeperCheckpointStore(f"127.0.0.1:{free_port()}", connect_timeout=1.0)


def test_bad_roots_are_typed_errors(zookeeper_server: ZooKeeperServer) -> None:
    for root in ("relative", "/trailing/", "/a//b"):
        with pytest.raises(CheckpointError):
            ZooKeeperCheckpointStore(zookeeper_server.hosts, root=root)


async def test_closed_store_refuses_calls(zookeeper_server: ZooKeeperServer) -> None:
    store = ZooKeeperCheckpointStore(zookeeper_server.hosts, root="/closed-test")
    await store.close()
    await store.close()
    with pytest.raises(CheckpointUnavailable):
        await store.get("x")


async def test_open_by_url(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    zk = open_checkpoint_store(f"zookeeper://{zookeeper_server.hosts}/url-test/root")
    sq = open_checkpoint_store(f"sqlite:///{tmp_path}/sub/cp.db")
    try:
        assert isinstance(zk, ZooKeeperCheckpointStore) and zk.root == "/url-test/root"
        assert isinstance(sq, SqliteCheckpointStore) and (tmp_path / "sub" / "cp.db").exists()
        for store in (zk, sq):
            await store.compare_and_set("x", "1", None)
            assert (await store.get("x")).value == "1"  # type: ignore[union-attr]
    finally:
        await zk.close()
        await sq.close()
    for bad in ("nothing", "redis://x", "zookeeper:///root"):
        with pytest.raises(CheckpointError):
            open_checkpoint_store(bad)


def test_server_runs_loopback_only_and_stops_without_orphans(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path).start()
    pid = server.pid
    assert pid is not None and os.path.exists(f"/proc/{pid}")
    cfg = (tmp_path / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in cfg and "admin.enableServer=false" in cfg
    server.stop()
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
