"""``run_job`` on SQLite checkpoints: repair exactly the lagging process, then the next batches.

The processes append what they apply to in-memory tables; a failing
process (an exception, or the SIGKILL hook in a real subprocess) leaves its
batch lagging for that process alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.jobs.batches import Batch, BatchInput, JobCheckpoints, OffsetRange
from framework.jobs.micro_batch import JobProcess, run_job

PROCESSES = ("store", "notifications", "index")
TOTAL = 10  # offsets in the one partition of the input


def _planner(cap: int, total: int = TOTAL) -> Any:
    async def plan(previous: Batch | None) -> BatchInput | None:
        start = 0 if previous is None else previous.input.ends()[("t", 0)]
        end = min(total, start + cap)
        return BatchInput(ranges=(OffsetRange("t", 0, start, end),))

    return plan


class Tables:
    """Per process: the offsets it applied, in order (a re-run would show up twice)."""

    def __init__(self, fail: str | None = None) -> None:
        self.applied: dict[str, list[int]] = {p: [] for p in PROCESSES}
        self.fail = fail

    def processes(self) -> list[JobProcess]:
        def make(name: str) -> JobProcess:
            async def run(batch: Batch) -> Mapping[str, Any]:
                if name == self.fail:
                    raise RuntimeError(f"{name} is down")
                r = batch.input.ranges[0]
                self.applied[name] += list(range(r.start, r.end))
                return {"applied": r.size}

            return JobProcess(name, run)

        return [make(p) for p in PROCESSES]


async def test_batches_run_until_the_input_is_read(tmp_path: Path) -> None:
    store = SqliteCheckpointStore(tmp_path / "cp.db")
    tables = Tables()
    run = await run_job(JobCheckpoints(store, "j", PROCESSES), tables.processes(), _planner(4))
    assert run.batches == [1, 2, 3] and run.repaired == {}
    assert all(applied == list(range(TOTAL)) for applied in tables.applied.values())
    assert run.final["done"] == dict.fromkeys(PROCESSES, 3) and run.final["lagging"] == []
    again = await run_job(JobCheckpoints(store, "j", PROCESSES), tables.processes(), _planner(4))
    assert again.batches == [] and all(len(a) == TOTAL for a in tables.applied.values())
    store.close_sync()


async def test_a_failed_process_is_repaired_alone_before_the_next_batch(tmp_path: Path) -> None:
    store = SqliteCheckpointStore(tmp_path / "cp.db")
    log = tmp_path / "apply.jsonl"
    down = Tables(fail="notifications")
    with pytest.raises(RuntimeError, match="notifications is down"):
        await run_job(JobCheckpoints(store, "j", PROCESSES), down.processes(), _planner(4), apply_log=log)
    assert down.applied == {"store": [0, 1, 2, 3], "notifications": [], "index": []}
    state = await JobCheckpoints(store, "j", PROCESSES).state()
    assert state.lagging() == ("notifications", "index")

    up = Tables()
    run = await run_job(
        JobCheckpoints(store, "j", PROCESSES), up.processes(), _planner(4), max_batches=1, apply_log=log
    )
    assert run.repaired == {1: ["notifications", "index"]} and run.batches == [2]
    assert up.applied == {"store": [4, 5, 6, 7], "notifications": list(range(8)), "index": list(range(8))}
    done = [json.loads(line) for line in log.read_text().splitlines() if '"done"' in line]
    assert [(d["process"], d["batch_id"], d["repair"]) for d in done] == [
        ("store", 1, False),
        ("notifications", 1, True),
        ("index", 1, True),
        ("store", 2, False),
        ("notifications", 2, False),
        ("index", 2, False),
    ]
    store.close_sync()


async def test_processes_must_match_the_checkpoints(tmp_path: Path) -> None:
    store = SqliteCheckpointStore(tmp_path / "cp.db")
    with pytest.raises(ValueError, match="differ"):
        await run_job(JobCheckpoints(store, "j", PROCESSES), Tables().processes()[::-1], _planner(4))
    store.close_sync()


_CHILD = """
import asyncio, sys
sys.path.insert(0, {root!r})
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.jobs.batches import JobCheckpoints
from framework.jobs.micro_batch import run_job
from framework.testing.faults import kill_after
from tests.jobs.test_micro_batch import PROCESSES, Tables, _planner

tables = Tables()
store = SqliteCheckpointStore({db!r})
hook = kill_after(sys.argv[1]) if len(sys.argv) > 1 else None
run = asyncio.run(run_job(JobCheckpoints(store, "j", PROCESSES), tables.processes(), _planner(4),
                          apply_log={log!r}, after_process=hook))
print(run.repaired, run.batches)
"""


@pytest.mark.parametrize("process", PROCESSES)
def test_sigkill_after_a_process_checkpointed_repairs_exactly_the_rest(tmp_path: Path, process: str) -> None:
    """A real process kills itself after ``process`` recorded batch 2; the next run repairs the
    processes after it, for batch 2 only, and every process applies every batch once."""
    db, log = str(tmp_path / "cp.db"), str(tmp_path / "apply.jsonl")
    code = _CHILD.format(root=str(Path(__file__).resolve().parents[2]), db=db, log=log)
    env = dict(os.environ)
    killed = subprocess.run(
        [sys.executable, "-c", code, f"{process}@2"], env=env, capture_output=True, timeout=60
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    after = PROCESSES[PROCESSES.index(process) + 1 :]
    finished = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, timeout=60, text=True
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    expected_repair = {2: list(after)} if after else {}
    assert finished.stdout.strip() == f"{expected_repair} [3]"
    entries = [json.loads(line) for line in Path(log).read_text().splitlines()]
    for phase in ("start", "done"):
        runs = sorted((e["process"], e["batch_id"]) for e in entries if e["phase"] == phase)
        assert runs == sorted((p, b) for p in PROCESSES for b in (1, 2, 3)), (phase, runs)
