"""Open a lock-domain backend from a URL: ``sqlite:///PATH`` or ``zookeeper://H1:P1,H2:P2/ROOT``.

SQLite URLs follow ``stores.open.sqlite_path`` (``sqlite:///relative``,
``sqlite:////absolute``); a ZooKeeper URL without a root uses ``/converge/jobs``.
"""

from __future__ import annotations

from framework.jobs.locks import DomainLocks, JobLockError
from stores.open import sqlite_path

__all__ = ["open_domain_locks", "JOB_LOCKS_ENV", "DEFAULT_JOB_LOCKS_URL"]

#: Environment variable naming the lock backend of ``converge jobs`` and of coordinators built from a URL.
JOB_LOCKS_ENV = "CONVERGE_JOB_LOCKS"
#: The embedded default, beside the local stack's data.
DEFAULT_JOB_LOCKS_URL = "sqlite:///.converge/jobs.db"


def open_domain_locks(url: str, *, lease: float = 10.0, session_timeout: float = 10.0) -> DomainLocks:
    """The backend ``url`` names; ``lease`` (SQLite) or ``session_timeout`` (ZooKeeper) in seconds
    bounds how long a killed holder keeps a lock. Blocking: a ZooKeeper backend connects here."""
    scheme, sep, rest = url.partition("://")
    if not sep or not rest:
        raise JobLockError(f"job lock URL must be sqlite:///PATH or zookeeper://HOSTS/ROOT: {url!r}")
    if scheme == "sqlite":
        from framework.jobs.locks_sqlite import SqliteDomainLocks

        try:
            path = sqlite_path(url)
        except ValueError as exc:
            raise JobLockError(str(exc)) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteDomainLocks(path, lease=lease)
    if scheme == "zookeeper":
        from framework.jobs.locks_zookeeper import DEFAULT_JOBS_ROOT, ZooKeeperDomainLocks

        hosts, slash, root = rest.partition("/")
        if not hosts:
            raise JobLockError(f"no ZooKeeper hosts in {url!r}")
        return ZooKeeperDomainLocks(
            hosts, root=f"/{root}" if slash and root else DEFAULT_JOBS_ROOT, session_timeout=session_timeout
        )
    raise JobLockError(f"unknown job lock scheme {scheme!r} (sqlite or zookeeper)")
