"""The only worker of a group, killed with SIGKILL and restarted on the same host, gets every
partition back and commits within 10 s.

Real parts: a noida-db of its own, ``converge worker`` subprocesses of each example app (an
aggregate and notifications among their agents, so Faust recovers tables before it calls the
app's tasks). noida-db keeps the killed member for ever and holds the new worker's JoinGroup until
it rejoins; the new worker's group watch runs from its start (not after table recovery, which waits
for an assignment) and removes the dead member of its host (``framework.runtime.group_watch``).
Each try: SIGKILL the worker, restart it with the same data dir, and within 10 s of the restart
the group is Stable with the new worker alone holding every partition of the app's topics, and
records produced then to every partition are committed. The default variant makes 5 tries per
app (10 in all); ``--faults-long``, 10 per app.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.faults.group_runs import APPS, GroupRun
from tests.support.fault_figures import FaultFigures

pytestmark = pytest.mark.faults

#: Seconds from the restart to every partition assigned and committing (issue 43).
BACK_WITHIN = 10.0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("module", APPS)
def test_the_only_worker_killed_and_restarted_gets_its_partitions_back(
    module: str,
    fresh_stack: LocalStack,
    tmp_path: Path,
    fault_plan: FaultPlan,
    report: Callable[[FaultFigures], None],
) -> None:
    started = time.monotonic()
    run = GroupRun(fresh_stack, tmp_path, module)
    figures = FaultFigures(f"only worker kill -9 and restart ({module.split('.')[1]})")
    proc = run.start("w")
    run.wait_sole_owner(proc, time.monotonic() + 90)
    tries, took = 10 if fault_plan.long else 5, []
    try:
        for i in range(tries):
            kill_worker(proc)
            figures.kills += 1
            restarted = time.monotonic()
            proc = run.start("w")  # the same worker, the same data dir
            figures.restarts += 1
            deadline = restarted + BACK_WITHIN
            try:
                run.wait_sole_owner(proc, deadline)
            except AssertionError as exc:
                raise AssertionError(f"try {i + 1}: {exc}\n{run.log('w')}") from None
            owned = time.monotonic() - restarted
            committed = run.mark_and_wait_committed(deadline)
            took.append(time.monotonic() - restarted)
            assert committed, f"try {i + 1}: not committing within {BACK_WITHIN:.0f} s\n{run.log('w')}"
            print(f"try {i + 1}: back {owned:.1f} s and committing {took[-1]:.1f} s after the restart")
    finally:
        code = stop_worker(proc)
    figures.seconds = time.monotonic() - started
    report(figures)
    assert code == 0, run.log("w")
    assert "removed member" in run.log("w", 10**9)
    assert max(took) <= BACK_WITHIN, took
