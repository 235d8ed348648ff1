"""SIGKILL of a busy worker of the reference app at random points of a stream, restarted each time."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from examples.activity_platform.generator import generate_history
from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.reference_runs import ReferenceRun

pytestmark = pytest.mark.faults


def test_sigkill_at_random_points_then_restart_converges(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """The history arrives in slices; while each is processed the worker is killed with SIGKILL after
    a random number of processed events and restarted. noida-db keeps a killed member in its group
    forever, so the broker is restarted gracefully before each new worker (a broker restart too).
    The last worker drains everything: nothing lost or divergent against the oracle, nothing parked."""
    started = time.monotonic()
    rng = random.Random(fault_plan.seed)
    history = generate_history(fault_plan.seed, fault_plan.kill_events)
    events = list(history.events)
    run = ReferenceRun(fresh_stack, tmp_path)
    figures = FaultFigures("sigkill", events=len(events))
    per_slice = -(-len(events) // (fault_plan.kills + 1))
    slices = [events[i : i + per_slice] for i in range(0, len(events), per_slice)]
    for i in range(fault_plan.kills):
        run.produce(slices[i])
        proc = run.start("w")
        figures.restarts += i > 0
        target = rng.randint(1, len(slices[i]))  # processed events (agents and projector) before the kill
        done = run.wait_processed("w", proc, target, 120)
        assert proc.poll() is None, f"the worker died before kill {i + 1}:\n{run.log_tail('w')}"
        time.sleep(rng.uniform(0, 0.2))
        kill_worker(proc)
        print(f"kill {i + 1}: after {done} processed events (target {target}, slice of {len(slices[i])})")
        figures.kills += 1
        fresh_stack.restart()  # a killed consumer stays in its group on noida-db
        figures.outages += 1
    run.produce([e for s in slices[fault_plan.kills :] for e in s])
    proc = run.start("w")
    figures.restarts += 1
    try:
        drained = run.drain(180)
        alive = proc.poll() is None
    finally:
        code = stop_worker(proc)
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert drained and alive and code == 0, (drained, alive, code, run.log_tail("w"))
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]
