"""Micro-batch jobs: the job checkpoint store (exactly-once effect across tables) and the job
coordinator (one job at a time per lock domain, in a declared order)."""

from __future__ import annotations

from framework.jobs.checkpoint import (
    Batch,
    BatchInput,
    JobCheckpointError,
    JobCheckpoints,
    JobFenced,
    JobState,
    OffsetRange,
)
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
from framework.jobs.micro_batch import JobProcess, JobRun, run_job

__all__: list[str] = [
    # job checkpoints and micro-batch runs
    "Batch",
    "BatchInput",
    "JobCheckpointError",
    "JobCheckpoints",
    "JobFenced",
    "JobProcess",
    "JobRun",
    "JobState",
    "OffsetRange",
    "run_job",
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
