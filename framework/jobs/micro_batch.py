"""Running a micro-batch job on its checkpoints: repair the lagging processes, then new batches.

``run_job`` reads the job's checkpoints; every process that has not completed
the current batch re-runs exactly that batch (its recorded input), alone, in
declared order, and records it; then, batch after batch, it asks ``plan`` for
the next input (``None``: nothing new), records the batch before running it
and runs every process on it, each recording its completion after its
writes are durable.

``apply_log`` (optional) gets one JSON line per process run, ``start`` (with
the batch's input) before it and ``done`` after its checkpoint, so a test or an operator can see which
process ran which batch, and how often. ``after_process`` (optional) is called with the
process's name and the batch id right after a process recorded a batch: a fault test
passes one that kills the job there (``framework.testing.faults.kill_after``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.jobs.batches import Batch, BatchInput, JobCheckpoints, JobState

__all__ = ["JobProcess", "JobRun", "run_job", "AfterProcess"]

#: Called with a process's name and the batch id once the process recorded the batch.
AfterProcess = Callable[[str, int], None]


@dataclass(frozen=True)
class JobProcess:
    """One process of a job (one target table or step): ``run(batch)`` writes the batch's effect
    on its target, idempotently, and returns a small report (JSON-able; ``run_job`` adds the
    process's ``seconds``, checkpoint included)."""

    name: str
    run: Callable[[Batch], Awaitable[Mapping[str, Any] | None]]


@dataclass
class JobRun:
    """What one run of a job did: the batches it repaired (process per batch id), the batches it
    ran whole, and each process's report per batch id."""

    job: str
    repaired: dict[int, list[str]] = field(default_factory=dict)
    batches: list[int] = field(default_factory=list)
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "repaired": {str(k): v for k, v in self.repaired.items()},
            "batches": self.batches,
            "reports": {str(k): v for k, v in self.reports.items()},
            "final": self.final,
        }


def _log(path: Path | None, **entry: Any) -> None:
    if path is None:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


async def _run(
    checkpoints: JobCheckpoints,
    process: JobProcess,
    batch: Batch,
    repair: bool,
    log: Path | None,
    after: AfterProcess | None,
) -> Any:
    entry = {"job": checkpoints.job, "process": process.name, "batch_id": batch.batch_id, "repair": repair}
    _log(log, phase="start", input=batch.input.to_json(), began_at=batch.began_at, **entry)
    started = time.monotonic()
    report = dict(await process.run(batch) or {})
    await checkpoints.complete(process.name, batch)
    report["seconds"] = round(time.monotonic() - started, 3)
    _log(log, phase="done", seconds=report["seconds"], **entry)
    if after is not None:
        after(process.name, batch.batch_id)
    return report


async def run_job(
    checkpoints: JobCheckpoints,
    processes: Sequence[JobProcess],
    plan: Callable[[Batch | None], Awaitable[BatchInput | None]],
    *,
    max_batches: int | None = None,
    apply_log: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] = time.time,
    after_process: AfterProcess | None = None,
) -> JobRun:
    """Repair the current batch in its lagging processes, then run new batches until ``plan``
    returns None (nothing new) or ``max_batches`` new batches ran.

    ``processes`` are the checkpoints' processes, in the same order. A
    process that raises stops the run; its batch stays current and lagging
    there, so the next run repairs it.
    """
    if tuple(p.name for p in processes) != checkpoints.processes:
        raise ValueError(
            f"processes {[p.name for p in processes]} differ from the checkpoints' {checkpoints.processes}"
        )
    log = None if apply_log is None else Path(apply_log)
    run = JobRun(checkpoints.job)
    state: JobState = await checkpoints.state()
    if state.batch is not None and state.lagging():
        lagging = state.lagging()
        run.repaired[state.batch.batch_id] = list(lagging)
        for p in processes:
            if p.name in lagging:
                report = await _run(checkpoints, p, state.batch, True, log, after_process)
                run.reports.setdefault(state.batch.batch_id, {})[p.name] = report
    current = state.batch
    while max_batches is None or len(run.batches) < max_batches:
        batch_input = await plan(current)
        if batch_input is None or batch_input.empty:
            break
        current = await checkpoints.begin(batch_input, int(clock() * 1_000_000))
        run.batches.append(current.batch_id)
        for p in processes:
            run.reports.setdefault(current.batch_id, {})[p.name] = await _run(
                checkpoints, p, current, False, log, after_process
            )
    run.final = (await checkpoints.state()).to_dict()
    return run
