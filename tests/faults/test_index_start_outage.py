"""A worker started while its search index is down (noida-db's Elasticsearch stopped first), for
each example app: it does not exit (``ensure_index`` is retried in the background, the projector's
writes block and pause as in any index outage, the agents write the store on), and once the index
answers every partition of the projector's change topic commits within ``RECOVERY_BOUND`` (5 s),
nothing is parked, and the store and index are the oracle's."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history
from framework.local_stack import LocalStack
from framework.worker.processes import stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.index_outage import CommitWatch, DeskRun, assert_recovered, index_back
from tests.support.reference_runs import ReferenceRun
from tests.support.stack_faults import index_answers, stop_service

pytestmark = pytest.mark.faults


def _opened_without_index(log: Path, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> float:
    """Wait until the worker opened its resources without the index (its log says so); when."""
    deadline = time.monotonic() + timeout
    while "starting without it" not in (log.read_text(errors="replace") if log.exists() else ""):
        assert proc.poll() is None, f"the worker exited at start:\n{log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, (
            f"no start without the index:\n{log.read_text(errors='replace')[-3000:]}"
        )
        time.sleep(0.1)
    return time.monotonic()


def test_an_activity_worker_started_during_an_index_outage_waits_then_drains(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    started = time.monotonic()
    history = generate_history(fault_plan.seed + 3, fault_plan.stream_events // 2)
    events = list(history.events)
    run = ReferenceRun(fresh_stack, tmp_path)
    figures = FaultFigures("worker started in an index outage", events=len(events))
    stop_service(fresh_stack, "elasticsearch")
    figures.outages += 1
    assert not index_answers(fresh_stack)
    proc = run.start("w")
    topics = [activity_app.change_topic(p) for p in activity_app.projections]
    commits = CommitWatch(run.broker, run.app_id, topics).__enter__()
    seen = {"down": False, "paused": False, "stored": 0}
    try:
        down_at = _opened_without_index(tmp_path / "w" / "worker.log", proc)
        for i in range(0, len(events), 200):
            run.produce(events[i : i + 200])
            time.sleep(0.1)
        while time.monotonic() - down_at < fault_plan.index_outage_s:
            assert proc.poll() is None, f"the worker exited during the outage:\n{run.log_tail('w')}"
            for name, status in run.status("w", proc).items():
                if name.startswith("project."):
                    seen["down"] |= bool(status.get("sinks", {}).get("index", {}).get("down"))
                    seen["paused"] |= any(p.get("paused") for p in status.get("partitions", {}).values())
            seen["stored"] = run.counter("w", "processed", proc, projector=False)
            time.sleep(0.25)
        parked_during = len(run.parked())
        drained, recovery = index_back(
            fresh_stack, run.drain, commits, down_at, "the worker started without it"
        )
        alive = proc.poll() is None
    finally:
        commits.__exit__()
        code = stop_worker(proc)
    print(f"commits moved again after the index answered (s): {recovery}; seen during the outage: {seen}")
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, run.log_tail("w"))
    assert seen["stored"] > 0, f"the agents stored nothing during the outage:\n{run.log_tail('w')}"
    assert seen["down"] and seen["paused"], f"the projector never paused ({seen}):\n{run.log_tail('w')}"
    assert parked_during == 0 and figures.parked == 0, run.parked()[:3]
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert_recovered(recovery, run.log_tail("w"))


def test_a_support_desk_worker_started_during_an_index_outage_waits_then_drains(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    started = time.monotonic()
    run = DeskRun(fresh_stack, tmp_path, fault_plan.seed + 6, tickets=150)
    events = run.arrival
    figures = FaultFigures("worker started in an index outage, support desk", events=len(events))
    stop_service(fresh_stack, "elasticsearch")
    figures.outages += 1
    proc = run.start()
    commits = CommitWatch(run.broker, run.app_id, run.index_topics).__enter__()
    try:
        down_at = _opened_without_index(run.work / "w" / "worker.log", proc)
        for i in range(0, len(events), 200):
            run.produce(events[i : i + 200])
            time.sleep(0.1)
        while time.monotonic() - down_at < fault_plan.index_outage_s:
            assert proc.poll() is None, f"the worker exited during the outage:\n{run.log_tail()}"
            time.sleep(0.25)
        parked_during = len(run.parked())
        drained, recovery = index_back(
            fresh_stack, run.drain, commits, down_at, "the worker started without it"
        )
        alive = proc.poll() is None
    finally:
        commits.__exit__()
        code = stop_worker(proc)
    print(f"commits moved again after the index answered (s): {recovery}")
    found = run.divergences()
    figures.settle(0, len(found), len(run.parked()), started)
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, run.log_tail())
    assert parked_during == 0 and figures.parked == 0, run.parked()[:3]
    assert not found, "\n".join(map(str, found[:20]))
    assert_recovered(recovery, run.log_tail())
