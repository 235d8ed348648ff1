"""Open a coordination backend from a URL (``framework.coordination.urls``): one opener per contract.

Both open blocking stores: a ZooKeeper backend connects here, a SQLite file's
directory is created.
"""

from __future__ import annotations

from framework.coordination.checkpoints import BlockingCheckpointStore
from framework.coordination.locks import DomainLocks
from framework.coordination.urls import CoordinationUrl, parse_coordination_url

__all__ = ["open_checkpoint_store", "open_domain_locks", "DEFAULT_JOB_LOCKS_URL"]

#: The embedded default, beside the local stack's data.
DEFAULT_JOB_LOCKS_URL = "sqlite:///.converge/jobs.db"


def _sqlite_file(parsed: CoordinationUrl) -> str:
    assert parsed.path is not None
    parsed.path.parent.mkdir(parents=True, exist_ok=True)
    return str(parsed.path)


def open_checkpoint_store(url: str) -> BlockingCheckpointStore:
    """The checkpoint store ``url`` names; a ZooKeeper URL without a root uses ``/converge/checkpoints``."""
    parsed = parse_coordination_url(url, "checkpoint store")
    if parsed.scheme == "sqlite":
        from framework.coordination.sqlite import SqliteCheckpointStore

        return SqliteCheckpointStore(_sqlite_file(parsed))
    from framework.coordination.zookeeper import DEFAULT_ROOT, ZooKeeperCheckpointStore

    return ZooKeeperCheckpointStore(parsed.hosts, root=parsed.root or DEFAULT_ROOT)


def open_domain_locks(url: str, *, lease: float = 10.0, session_timeout: float = 10.0) -> DomainLocks:
    """The lock-domain backend ``url`` names; ``lease`` (SQLite) or ``session_timeout`` (ZooKeeper)
    in seconds bounds how long a killed holder keeps a lock. A ZooKeeper URL without a root uses
    ``/converge/jobs``."""
    parsed = parse_coordination_url(url, "job lock")
    if parsed.scheme == "sqlite":
        from framework.coordination.sqlite import SqliteDomainLocks

        return SqliteDomainLocks(_sqlite_file(parsed), lease=lease)
    from framework.coordination.zookeeper import DEFAULT_JOBS_ROOT, ZooKeeperDomainLocks

    return ZooKeeperDomainLocks(
        parsed.hosts, root=parsed.root or DEFAULT_JOBS_ROOT, session_timeout=session_timeout
    )
