"""The contract of a lock-domain backend: one distributed lock per domain and the domain's last runner.

A lock domain is the resource that jobs must not change at the same time
(e.g. a table). Per domain a backend keeps:

- the lock: at most one holder at a time, taken without waiting
  (``try_acquire``); a holder that dies loses it when its session or lease
  expires;
- the last runner: which job took the last turn, with a version that grows
  by one on every change and is only changed by compare-and-swap, and only
  while the caller still holds the lock (the write is fenced by the lock);
- the members: the jobs that declared themselves in the domain (name,
  predecessor), for ``converge jobs status``.

Backends: ``sqlite.SqliteDomainLocks`` (embedded stack) and
``zookeeper.ZooKeeperDomainLocks`` (kazoo), beside the checkpoint stores of
the same backend. Each method blocks; the coordinator calls them from a thread.
"""

from __future__ import annotations

import abc
import json
import os
import re
import socket
from dataclasses import asdict, dataclass, field

from framework.core.errors import ConvergeError, Transient

__all__ = [
    "DomainLocks",
    "DomainStatus",
    "JobLockError",
    "LastRunner",
    "LastRunnerConflict",
    "Lease",
    "LeaseLost",
    "LocksUnavailable",
    "Member",
    "check_job_name",
    "default_holder_id",
]

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")


class JobLockError(ConvergeError, ValueError):
    """A domain or job name is malformed, or a backend URL is unusable."""


class LocksUnavailable(Transient):
    """The backend cannot be reached now; the round may be retried."""


class LeaseLost(Transient):
    """The caller no longer holds the domain's lock (its session or lease expired, or it was taken)."""


class LastRunnerConflict(ConvergeError):
    """The last runner changed since it was read (``actual`` is its current version, None when absent)."""

    def __init__(self, domain: str, expected: int | None, actual: int | None) -> None:
        super().__init__(f"domain {domain!r}: last runner at version {actual}, expected {expected}")
        self.domain = domain
        self.expected = expected
        self.actual = actual


def check_job_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is a valid domain or job name (1..100 of ``[A-Za-z0-9_.-]``, not . or ..)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise JobLockError(f"{what} must be 1..100 characters of [A-Za-z0-9_.-], not '.' or '..': {name!r}")
    return name


def default_holder_id(job: str) -> str:
    """``JOB@HOST:PID``: who holds a lock, as shown by ``converge jobs status``."""
    return f"{job}@{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lock: the domain, the holder's id and the backend's handle (a znode, a lease token)."""

    domain: str
    holder: str
    token: str


@dataclass(frozen=True, slots=True)
class LastRunner:
    """Who took the domain's last turn.

    ``round`` counts the turns taken in the domain (1 for the first);
    ``state`` is ``started`` while the turn runs, then ``done`` or
    ``failed`` (a turn whose holder was killed stays ``started``);
    ``version`` is the backend's compare-and-swap version of this record.
    """

    job: str
    round: int
    state: str
    holder: str
    at: float
    version: int = 0

    def encode(self) -> str:
        """The record as JSON text, without its version."""
        data = asdict(self)
        del data["version"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def decode(cls, text: str, version: int) -> LastRunner:
        """The record stored as ``text`` at ``version``."""
        data = json.loads(text)
        return cls(
            job=str(data["job"]),
            round=int(data["round"]),
            state=str(data["state"]),
            holder=str(data.get("holder", "")),
            at=float(data.get("at", 0.0)),
            version=version,
        )


@dataclass(frozen=True, slots=True)
class Member:
    """A job declared in a domain: its name, the job it runs after, and the cycle's first job."""

    job: str
    predecessor: str | None
    start_with: str | None = None


@dataclass(frozen=True, slots=True)
class DomainStatus:
    """What ``converge jobs status`` shows for one domain.

    ``holders``: the current holder first (a ZooKeeper lock may list
    contenders that are only trying); ``expired``: a lease whose holder
    stopped renewing it and that nobody has taken since (SQLite only).
    """

    domain: str
    holders: list[str] = field(default_factory=list)
    last: LastRunner | None = None
    members: list[Member] = field(default_factory=list)
    expired: str | None = None


class DomainLocks(abc.ABC):
    """Per-domain lock, last runner and members on one backend (blocking methods)."""

    @abc.abstractmethod
    def try_acquire(self, domain: str, holder: str) -> Lease | None:
        """Take the domain's lock without waiting: a Lease, or None when someone else holds it."""

    @abc.abstractmethod
    def held(self, lease: Lease) -> bool:
        """Whether ``lease`` still holds its domain's lock."""

    @abc.abstractmethod
    def release(self, lease: Lease) -> None:
        """Give the lock back (nothing happens when it was already lost)."""

    @abc.abstractmethod
    def last_runner(self, domain: str) -> LastRunner | None:
        """The domain's last runner, or None when no job ran in it yet."""

    @abc.abstractmethod
    def swap_last_runner(self, lease: Lease, runner: LastRunner, expected_version: int | None) -> LastRunner:
        """Store ``runner`` if the record is at ``expected_version`` (None: absent) and ``lease`` holds.

        Returns the stored record with its new version; raises
        LastRunnerConflict or LeaseLost, leaving the record unchanged, otherwise.
        """

    @abc.abstractmethod
    def declare(self, domain: str, member: Member) -> None:
        """Record ``member`` as a job of ``domain`` (replacing an earlier declaration of that job)."""

    @abc.abstractmethod
    def domains(self) -> list[str]:
        """Every domain with a lock, a last runner or a member, sorted."""

    @abc.abstractmethod
    def status(self, domain: str) -> DomainStatus:
        """Holders, last runner and members of ``domain``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release held locks and the connection."""

    def __enter__(self) -> DomainLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
