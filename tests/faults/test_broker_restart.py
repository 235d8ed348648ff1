"""A graceful broker restart in the middle of a stream, the worker of the reference app running on."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from examples.activity_platform.generator import generate_history
from framework.local_stack import LocalStack
from framework.worker.processes import stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.reference_runs import ReferenceRun

pytestmark = pytest.mark.faults


def test_graceful_broker_restart_mid_stream_converges(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """Half the history is produced and partly processed, noida-db is stopped with SIGINT and started
    again on its data, the other half is produced: the same worker process drains both halves (it
    survives the rebalance that follows) and the state matches the oracle, nothing parked."""
    started = time.monotonic()
    history = generate_history(fault_plan.seed + 1, fault_plan.stream_events)
    events = list(history.events)
    half = len(events) // 2
    run = ReferenceRun(fresh_stack, tmp_path)
    figures = FaultFigures("broker restart", events=len(events))
    run.produce(events[:half])
    proc = run.start("w")
    try:
        done = run.wait_processed("w", proc, half // 2, 120)
        fresh_stack.restart()
        figures.outages += 1
        print(f"broker restarted after {done} processed events")
        run.produce(events[half:])
        drained = run.drain(180)
        alive = proc.poll() is None
    finally:
        code = stop_worker(proc)
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert alive, f"the worker died after the broker restart (exit {code}):\n{run.log_tail('w')}"
    assert drained and code == 0, (
        f"drained={drained} exit={code}\nlast status: {run.status('w')}\nlog:\n{run.log_tail('w', 12000)}"
    )
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]
