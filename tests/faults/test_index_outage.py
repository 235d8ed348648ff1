"""An outage of the search index alone (noida-db stops its Elasticsearch service) in the middle of a
stream of each example app: the projector pauses, nothing is parked, every partition of its change
topic commits again within ``RECOVERY_BOUND`` (5 s) of the index answering (issue 43: the runtime
probes the index while it is down instead of sleeping out a grown back-off), and everything
converges after."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.kafka_admin import wait_group_settled
from framework.local_stack import LocalStack
from framework.worker.processes import stop_worker
from tests.faults.conftest import FaultPlan
from tests.support.fault_figures import FaultFigures
from tests.support.index_outage import CommitWatch, DeskRun, assert_recovered, index_back
from tests.support.reference_runs import ReferenceRun
from tests.support.stack_faults import index_answers, stop_service

pytestmark = pytest.mark.faults


def test_index_outage_pauses_parks_nothing_then_converges(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """The history is streamed in small chunks (about 600 events/s); when half of it is out,
    Elasticsearch stops, so the projector's recent attempts are all successes and many of its
    keys fail at once. The rest arrives during the outage (default 12 s, long variant 60 s): the
    projector's index sink is seen down and its partitions paused, no event is parked during or
    after it; once the index is back the same worker drains everything and the state matches
    the oracle. Every partition of the projector's change topic commits again within 5 s of the
    index answering."""
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

    commits = CommitWatch(run.broker, run.app_id, [app.change_topic(p) for p in app.projections]).__enter__()
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
        drained, recovery = index_back(fresh_stack, run.drain, commits, outage_started, "it stopped")
        alive = proc.poll() is None
    finally:
        commits.__exit__()
        code = stop_worker(proc)
    print(f"commits moved again after the index answered (s): {recovery}")
    outcome = run.outcome(history)
    figures.settle(outcome.lost, outcome.divergent, len(run.parked()), started)
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, run.log_tail("w"))
    assert seen["down"] and seen["paused"], f"the projector never paused ({seen}):\n{run.log_tail('w')}"
    assert (seen["parked"], parked_files) == (0, 0), f"parked during the outage:\n{run.log_tail('w')}"
    assert (outcome.lost, outcome.divergent) == (0, 0), outcome.examples
    assert figures.parked == 0, run.parked()[:3]
    assert_recovered(recovery, run.log_tail("w"))


def test_support_desk_index_outage_every_partition_commits_again_within_the_bound(
    fresh_stack: LocalStack, tmp_path: Path, fault_plan: FaultPlan, report: Callable[[FaultFigures], None]
) -> None:
    """The support desk's delivered history streamed in chunks; the index stops half way, the
    rest arrives during the outage; once the index answers, every partition of the projector's
    change topic commits again within 5 s, nothing is parked and the store and index are the
    oracle's."""
    started = time.monotonic()
    run = DeskRun(fresh_stack, tmp_path, fault_plan.seed + 5, tickets=200)
    events = run.arrival
    figures = FaultFigures(
        f"index outage {fault_plan.index_outage_s:.0f} s, support desk", events=len(events)
    )
    proc = run.start()
    asyncio.run(wait_group_settled(run.broker, run.app_id, 1, timeout=120))  # its projector runs
    commits = CommitWatch(run.broker, run.app_id, run.index_topics).__enter__()
    try:
        outage_started = None
        for i in range(0, len(events), 100):
            run.produce(events[i : i + 100])
            if outage_started is None and i >= len(events) // 2:
                stop_service(fresh_stack, "elasticsearch")
                figures.outages += 1
                outage_started = time.monotonic()
            time.sleep(0.15)
        assert outage_started is not None
        while time.monotonic() - outage_started < fault_plan.index_outage_s and proc.poll() is None:
            time.sleep(0.25)
        drained, recovery = index_back(fresh_stack, run.drain, commits, outage_started, "it stopped")
        alive = proc.poll() is None
    finally:
        commits.__exit__()
        code = stop_worker(proc)
    print(f"commits moved again after the index answered (s): {recovery}")
    found = run.divergences()
    figures.settle(0, len(found), len(run.parked()), started)
    report(figures)
    assert alive and drained and code == 0, (alive, drained, code, run.log_tail())
    assert not found, "\n".join(map(str, found[:20]))
    assert figures.parked == 0, run.parked()[:3]
    assert_recovered(recovery, run.log_tail())
