"""Micro-batch jobs: the job checkpoint store (exactly-once effect across tables) and the job
coordinator (one job at a time per lock domain, in a declared order)."""

from __future__ import annotations

from framework.jobs.coordinator import CoordinatorSettings, JobCoordinator, Turn, TurnLost
from framework.jobs.locks import (
    DomainLocks,
    DomainStatus,
    JobLockError,
    LastRunner,
    LeaseLost,
    LocksUnavailable,
)
from framework.jobs.locks_open import open_domain_locks

__all__: list[str] = [
    # job coordinator
    "CoordinatorSettings",
    "DomainLocks",
    "DomainStatus",
    "JobCoordinator",
    "JobLockError",
    "LastRunner",
    "LeaseLost",
    "LocksUnavailable",
    "Turn",
    "TurnLost",
    "open_domain_locks",
]
