"""Open a checkpoint store from a URL: ``sqlite:///PATH`` or ``zookeeper://H1:P1,H2:P2/ROOT``.

SQLite URLs follow ``stores.open.sqlite_path``: ``sqlite:///relative/path``, ``sqlite:////absolute/path``.
"""

from __future__ import annotations

from framework.coordination.checkpoints import BlockingCheckpointStore, CheckpointError
from stores.open import sqlite_path

__all__ = ["open_checkpoint_store"]


def open_checkpoint_store(url: str) -> BlockingCheckpointStore:
    """The checkpoint store ``url`` names (blocking: a ZooKeeper store connects here)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not rest:
        raise CheckpointError(
            f"checkpoint store URL must be sqlite:///PATH or zookeeper://HOSTS/ROOT: {url!r}"
        )
    if scheme == "sqlite":
        from framework.coordination.sqlite import SqliteCheckpointStore

        try:
            path = sqlite_path(url)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteCheckpointStore(path)
    if scheme == "zookeeper":
        from framework.coordination.zookeeper import DEFAULT_ROOT, ZooKeeperCheckpointStore

        hosts, slash, root = rest.partition("/")
        if not hosts:
            raise CheckpointError(f"no ZooKeeper hosts in {url!r}")
        return ZooKeeperCheckpointStore(hosts, root=f"/{root}" if slash and root else DEFAULT_ROOT)
    raise CheckpointError(f"unknown checkpoint store scheme {scheme!r} (sqlite or zookeeper)")
