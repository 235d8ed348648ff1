"""An outage of the search index alone (noida-db stops its Elasticsearch service) in the middle of a
stream of the reference app: the projector pauses, nothing is parked, everything converges after."""

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
from tests.support.stack_faults import index_answers, start_service, stop_service

pytestmark = pytest.mark.faults


def test_index_outage_pauses_parks_nothing_then_converges(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """The history is streamed in small chunks (about 600 events/s); when half of it is out,
    Elasticsearch stops, so the projector's recent attempts are all successes and many of its
    keys fail at once. The rest arrives during the outage (default 12 s, long variant 60 s): the
    projector's index sink is seen down and its partitions paused, no event is parked during or
    after it; once the index is back the same worker drains everything and the state matches
    the oracle."""
    started = time.monotonic()
    history = generate_history(fault_plan.seed + 2, fault_plan.stream_events)
    events = list(history.events)
    run = ReferenceRun(fresh_stack, tmp_path)
    figures = FaultFigures(f"index outage {fault_plan.index_outage_s:.0f} s", events=len(events))
    proc = run.start("w")
    seen = {"down": False, "paused": False, "parked": 0}

    def watch() -> None:
        seen["parked"] = max(seen["parked"], run.counter("w", "parked", proc))
        for name, status in run.status("w", proc).items():
            if name.startswith("project."):
                seen["down"] |= bool(status.get("sinks", {}).get("index", {}).get("down"))
                seen["paused"] |= any(p.get("paused") for p in status.get("partitions", {}).values())

    try:
        outage_started = None
        for i in range(0, len(events), 100):
            run.produce(events[i : i + 100])
            if outage_started is None and i >= len(events) // 2:
                print(f"index stopped after {run.counter('w', 'processed', proc, projector=True)} "
                      "projected changes")  # fmt: skip
                stop_service(fresh_stack, "elasticsearch")
                figures.outages += 1
                outage_started = time.monotonic()
                assert not index_answers(fresh_stack)
            if outage_started is not None:
                watch()
            time.sleep(0.15)
        assert outage_started is not None
        while time.monotonic() - outage_started < fault_plan.index_outage_s and proc.poll() is None:
            watch()
            time.sleep(0.25)
        parked_files = len(run.parked())
        start_service(fresh_stack, "elasticsearch")
        back = time.monotonic()
        drained = run.drain(180)
        print(f"index back after {back - outage_started:.1f} s; "
              f"drained={drained} {time.monotonic() - back:.1f} s later")  # fmt: skip
        alive = proc.poll() is None
    finally:
        code = stop_worker(proc)
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, run.log_tail("w"))
    assert seen["down"] and seen["paused"], f"the projector never paused ({seen}):\n{run.log_tail('w')}"
    assert (seen["parked"], parked_files) == (0, 0), f"parked during the outage:\n{run.log_tail('w')}"
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]
