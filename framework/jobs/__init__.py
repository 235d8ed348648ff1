"""Micro-batch jobs: the job checkpoint store (exactly-once effect across tables) and the job
coordinator (one job at a time per lock domain, in a declared order). The lock domains and
checkpoint stores they stand on are ``framework.coordination``'s."""

from __future__ import annotations

from framework.jobs.batches import (
    Batch,
    BatchInput,
    JobCheckpointError,
    JobCheckpoints,
    JobFenced,
    JobState,
    OffsetRange,
)
from framework.jobs.coordinator import CoordinatorSettings, JobCoordinator, Turn, TurnLost
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
    "JobCoordinator",
    "Turn",
    "TurnLost",
]
