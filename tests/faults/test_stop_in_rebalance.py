"""A worker stopped in the middle of a rebalance exits within its drain timeout plus a few seconds.

Real parts: a noida-db of its own, a support-desk ``converge worker`` subprocess and a
plain aiokafka consumer in another process, killed with SIGKILL once it holds the
group's partitions: noida-db keeps it as a member (it never evicts one), and its
long rebalance timeout holds the worker's JoinGroup unanswered. The worker gets
SIGINT while it waits there; aiokafka would wait for the answer up to the worker's
rebalance timeout (60 s) and mode then logs a traceback.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from examples.support_desk.app import app
from framework.kafka_admin import ensure_topics, group_assignments
from framework.local_stack import LocalStack
from framework.worker.processes import kill_worker, start_worker, stop_worker
from tests.support.outsider_member import leave_a_dead_outsider

pytestmark = pytest.mark.faults

#: the support desk's drain timeout (RuntimeConfig's default) + framework.worker.run.STOP_GRACE_S
STOP_BOUND = 10.0 + 5.0
MARGIN = 6.0  # a loaded machine



def _wait_state(broker: str, group: str, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (seen := asyncio.run(group_assignments(broker, group))[0]) != state:
        assert time.monotonic() < deadline, f"group {group} still {seen}, not {state}"
        time.sleep(0.2)


@pytest.mark.timeout(180)
def test_sigint_while_the_join_is_held_exits_in_bound_without_a_traceback(
    fresh_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert fresh_stack.info is not None
    monkeypatch.setenv("CONVERGE_LOGLEVEL", "info")  # the worker logs its joins
    boot = fresh_stack.info.kafka_bootstrap
    broker, group = f"kafka://{boot}", f"desk-{uuid.uuid4().hex[:8]}"
    topics = list(app.topics())
    asyncio.run(ensure_topics(broker, dict.fromkeys(topics, 2)))
    leave_a_dead_outsider(boot, group, topics)  # the broker keeps it: a member that will never rejoin
    env = {
        "CONVERGE_ES_URL": fresh_stack.info.es_url,
        "CONVERGE_APP_ID": group,
        "CONVERGE_WIDE_STORE": f"sqlite:///{(tmp_path / 'wide.db').resolve()}",
        "CONVERGE_PARTITIONS": "2",
    }
    log = tmp_path / "w" / "worker.log"
    worker = start_worker("examples.support_desk.app:app", tmp_path / "w", broker, env)
    try:
        _wait_state(broker, group, "PreparingRebalance", 60)  # the worker's JoinGroup is in
        time.sleep(2)
        assert worker.poll() is None, log.read_text()[-3000:]
        started = time.monotonic()
        code = stop_worker(worker, timeout=90)
        took = time.monotonic() - started
    finally:
        if worker.poll() is None:
            kill_worker(worker)
    text = log.read_text(errors="replace")
    assert "(Re-)joining group" in text and "Joined group" not in text  # it was stopped inside the join
    assert took < STOP_BOUND + MARGIN, f"stop took {took:.1f} s:\n{text[-3000:]}"
    assert code == 0 and "Traceback" not in text, text[-3000:]
