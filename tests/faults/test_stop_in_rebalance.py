"""A worker stopped (SIGINT) in the middle of a rebalance leaves its group before it exits.

Real parts: a noida-db of its own, ``converge worker`` subprocesses of each example app.

- A rebalance that completes: records flow all the time (so the workers commit every second,
  and the broker answers the commits of a rebalance IllegalGeneration); each try starts a second
  worker and sends SIGINT to the first as soon as a rebalance begins (the group leaves Stable, or
  the second worker logs its JoinGroup: a rebalance may last a few ms). The worker exits with
  code 0 within its stop bound, and the group, described on the broker when it has exited, holds
  no member of it (seen before: the consumer rejoined during the stop and the process exited with
  that member in the group, holding half the partitions until a peer of the same host removed it).
  The default variant makes 5 tries per app (10 in all); ``--faults-long``, 10 per app.
- A rebalance the broker holds (the support desk): a plain aiokafka consumer (``outsider``, which
  no worker removes) killed with SIGKILL once it held the partitions holds the worker's JoinGroup
  (noida-db keeps it for ever). The worker gets SIGINT while it waits there: it leaves (the member
  it is joining as) and exits within its stop bound, code 0, no traceback.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, stop_worker
from tests.faults.conftest import FaultPlan
from tests.faults.group_runs import APPS, GroupRun
from tests.support.fault_figures import FaultFigures
from tests.support.outsider_member import leave_a_dead_outsider

pytestmark = pytest.mark.faults

#: the examples' drain timeout (RuntimeConfig's default) + framework.worker.run.STOP_GRACE_S
STOP_BOUND = 10.0 + 5.0
MARGIN = 6.0  # a loaded machine


@pytest.mark.timeout(300)
@pytest.mark.parametrize("module", APPS)
def test_sigint_during_a_rebalance_leaves_the_group_before_the_exit(
    module: str,
    fresh_stack: LocalStack,
    tmp_path: Path,
    fault_plan: FaultPlan,
    report: Callable[[FaultFigures], None],
) -> None:
    started = time.monotonic()
    run = GroupRun(fresh_stack, tmp_path, module)
    figures = FaultFigures(f"sigint during a rebalance ({module.split('.')[1]})")
    name, proc = "w0", run.start("w0")
    run.wait_sole_owner(proc, time.monotonic() + 90)
    run.feed()
    tries = 10 if fault_plan.long else 5
    try:
        for i in range(1, tries + 1):
            time.sleep(1.0)  # commits flow
            begun = time.monotonic()
            following = run.start(f"w{i}")
            figures.restarts += 1
            state = run.wait_rebalance(f"w{i}", time.monotonic() + 60)
            proc.send_signal(signal.SIGINT)
            signalled = time.monotonic()
            code = proc.wait(STOP_BOUND + MARGIN)
            took = time.monotonic() - signalled
            left_in = run.members_of(proc, run.members()[1])
            print(f"try {i}: SIGINT {signalled - begun:.1f} s after a second worker's start, in {state}; "
                  f"exit {code} after {took:.1f} s; members of it left: {left_in}")  # fmt: skip
            log = run.log(name)
            assert code == 0 and "Traceback" not in log, f"try {i}: exit {code}\n{log}"
            assert not left_in, f"try {i}: the stopped worker is still in the group: {left_in}\n{log}"
            name, proc = f"w{i}", following
            # 90 s: noida-db may hold the JoinGroup the second worker sent just before the first
            # left for its whole rebalance timeout (60 s; seen in 1 of 10 tries): not this test's
            # subject, reported by the print below
            run.wait_sole_owner(proc, time.monotonic() + 90)
            print(f"try {i}: the second worker alone {time.monotonic() - signalled:.1f} s after the SIGINT")
    finally:
        run.stop_feeding()
        code = stop_worker(proc)
    figures.events = run.fed
    figures.seconds = time.monotonic() - started
    report(figures)
    assert code == 0, run.log(name)
    assert not run.members_of(proc, run.members()[1])


@pytest.mark.timeout(180)
def test_sigint_while_the_join_is_held_leaves_and_exits_in_bound_without_a_traceback(
    fresh_stack: LocalStack, tmp_path: Path
) -> None:
    assert fresh_stack.info is not None
    run = GroupRun(fresh_stack, tmp_path, APPS[0])
    # the broker keeps it: a member that will never rejoin
    leave_a_dead_outsider(fresh_stack.info.kafka_bootstrap, run.group, run.topics)
    worker = run.start("w")
    try:
        deadline = time.monotonic() + 60
        while not run.members_of(worker, run.members()[1]):  # its JoinGroup is in
            assert time.monotonic() < deadline, run.log("w")
            time.sleep(0.2)
        time.sleep(2)
        assert worker.poll() is None and run.members()[0] == "PreparingRebalance", run.log("w")
        started = time.monotonic()
        code = stop_worker(worker, timeout=90)
        took = time.monotonic() - started
    finally:
        if worker.poll() is None:
            kill_worker(worker)
    text = run.log("w", 10**9)
    assert "(Re-)joining group" in text and "Joined group" not in text  # it was stopped inside the join
    assert took < STOP_BOUND + MARGIN, f"stop took {took:.1f} s:\n{text[-3000:]}"
    assert code == 0 and "Traceback" not in text, text[-3000:]
    state, members = run.members()
    assert not run.members_of(worker, members), (state, members, text[-3000:])
    print(f"stop inside a held join: exit {code} after {took:.1f} s; {state} with {len(members)} member(s)")
