"""The runtime on the embedded broker (noida-db): order, failures, commits, crashes."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from framework.kafka_admin import committed_offsets, end_offsets, ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack, StackInfo
from framework.worker.processes import kill_worker, start_worker, stop_worker
from tests.support.order_runs import ORDER_APP as APP
from tests.support.order_runs import applied as _applied
from tests.support.order_runs import order_counters as _counters
from tests.support.order_runs import order_status as _status
from tests.support.order_runs import parked as _parked
from tests.support.order_runs import tick_event as _event
from tests.support.order_runs import tick_records as _records
from tests.support.order_runs import wait_until as _wait
from tests.support.outsider_member import leave_a_dead_outsider
from tests.support.status_file import read_status


def test_order_poison_and_blocked_key(stack: StackInfo, tmp_path: Path) -> None:
    """Per-key order holds; poison is parked; a blocked key holds its partition's commit only."""
    topic, group = f"order-{uuid.uuid4().hex[:8]}", f"order-app-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    keys = [f"k{i}" for i in range(30)]
    records = _records(keys, 40)
    poison = [(b"k3", b"{not json"), (b"k4", json.dumps({"event_id": "x"}).encode()),
              (b"k5", _event("k5", "ten"))]  # fmt: skip
    records[100:100] = poison
    release = tmp_path / "release"
    data = tmp_path / "w1"
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_FAIL_KEY": "k7", "ORDER_RELEASE": str(release)}
    proc = start_worker(APP, data, broker, env)
    try:
        asyncio.run(produce(broker, topic, records))
        others = 40 * 29
        _wait(lambda: len([r for r in _applied(data / "applied.db") if r[0] != "k7"]) >= others, 90,
              "unblocked keys")  # fmt: skip
        applied = _applied(data / "applied.db")
        assert not [r for r in applied if r[0] == "k7"]
        time.sleep(2.5)  # two commit intervals
        ends = asyncio.run(end_offsets(broker, topic))
        committed = asyncio.run(committed_offsets(broker, group, topic, ends))
        behind = [p for p in ends if committed[p] < ends[p]]
        assert len(behind) == 1, (committed, ends)  # only the blocked key's partition holds back
        release.touch()
        assert asyncio.run(wait_drained(broker, group, topic, timeout=60))
    finally:
        assert stop_worker(proc) == 0
    applied = _applied(data / "applied.db")
    per_key: dict[str, list[int]] = defaultdict(list)
    for k, n in applied:
        per_key[k].append(n)
    assert set(per_key) == set(keys)
    for k in keys:
        assert per_key[k] == list(range(40)), k  # in order, exactly once (no crash)
    parked = _parked(data)
    assert sorted((p.key, p.stage) for p in parked) == [(b"k3", "parse"), (b"k4", "parse"), (b"k5", "map")]
    assert {p.error_class for p in parked} == {"EventError", "TypeError"}
    assert all(p.value in {v for _, v in poison} for p in parked)


def test_kill_mid_stream_then_restart_converges(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """SIGKILL the worker mid-stream; after a broker restart and a new worker, every event is applied."""
    topic, group = "crash-in", "crash-app"
    assert fresh_stack.info is not None
    broker = f"kafka://{fresh_stack.info.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    keys = [f"c{i}" for i in range(20)]
    # 20 ms an event and one event of a key at a time: the 2,000 events take about 2.5 s, so the
    # kill (polled every 50 ms) lands mid-stream even on a fast machine
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_SLOW_MS": "20"}
    data = tmp_path / "w"
    proc = start_worker(APP, data, broker, env)
    asyncio.run(produce(broker, topic, _records(keys, 100)))
    _wait(lambda: len(_applied(data / "applied.db")) >= 600, 90, "some progress", poll=0.05)
    kill_worker(proc)
    first_run = len(_applied(data / "applied.db"))
    assert first_run < 2000
    # a SIGKILLed consumer stays in its group on noida-db: restart the broker on the same data
    fresh_stack.restart()
    proc = start_worker(APP, data, broker, env)
    try:
        assert asyncio.run(wait_drained(broker, group, topic, timeout=90))
    finally:
        assert stop_worker(proc) == 0
    applied = _applied(data / "applied.db")
    per_key: dict[str, list[int]] = defaultdict(list)
    for k, n in applied:
        per_key[k].append(n)
    for k in keys:
        seen = per_key[k]
        assert set(seen) == set(range(100)), k  # nothing lost
        assert seen[-1] == 99  # the last application of every key is its newest event
    assert len(applied) >= 2000  # at least once: redelivery may repeat a few


pytestmark = pytest.mark.slow


def test_destination_down_pauses_then_resumes_without_parking(stack: StackInfo, tmp_path: Path) -> None:
    """Every key fails for a while: nothing is parked or lost, order holds, consumption pauses and resumes."""
    topic, group = f"down-{uuid.uuid4().hex[:8]}", f"down-app-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    keys = [f"d{i}" for i in range(12)]
    release, data = tmp_path / "release", tmp_path / "w"
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_FAIL_KEY": "*",
           "ORDER_RELEASE": str(release), "ORDER_PARK_AFTER": "3"}  # fmt: skip
    proc = start_worker(APP, data, broker, env)
    try:
        asyncio.run(produce(broker, topic, _records(keys, 25)))
        _wait(lambda: _counters(data).get("pauses", 0) >= 1, 60, "consumption paused")
        time.sleep(1.0)  # several more failed retries while down: none may park (park_after=3)
        assert _counters(data)["parked"] == 0
        status = _status(data)
        assert status["sinks"]["recording"]["down"] and status["sinks"]["recording"]["outages"] >= 1
        blocked = [b for p in status["partitions"].values() for b in p["failed"].values()]
        assert blocked and all(b["destination_down"] and b["sink"] == "recording" for b in blocked)
        assert sum(p["skipped"] for p in status["partitions"].values()) > 0  # later events wait
        assert _applied(data / "applied.db") == []
        release.touch()
        assert asyncio.run(wait_drained(broker, group, topic, timeout=60))
        _wait(lambda: _counters(data).get("resumes", 0) >= 1, 10, "consumption resumed")
    finally:
        assert stop_worker(proc) == 0
    per_key: dict[str, list[int]] = defaultdict(list)
    for k, n in _applied(data / "applied.db"):
        per_key[k].append(n)
    assert {k: per_key[k] for k in keys} == {k: list(range(25)) for k in keys}
    assert _parked(data) == []


def test_lone_failing_key_is_parked_after_attempts(stack: StackInfo, tmp_path: Path) -> None:
    """One key keeps failing while events of other keys keep going through: a bad message,
    parked after N attempts; nothing lost. (Without the others' successes it is retried, not
    parked: the transient failure alone is no evidence against the message.)"""
    topic, group = f"bad-{uuid.uuid4().hex[:8]}", f"bad-app-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    keys = [f"b{i}" for i in range(10)]
    data = tmp_path / "w"
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_FAIL_KEY": "b3",
           "ORDER_RELEASE": str(tmp_path / "never"), "ORDER_PARK_AFTER": "3"}  # fmt: skip
    proc = start_worker(APP, data, broker, env)
    others = [k for k in keys if k != "b3"]
    sent = 5
    try:
        asyncio.run(produce(broker, topic, _records(keys, 5)))
        deadline = time.monotonic() + 90
        while len(_parked(data)) < 5 and time.monotonic() < deadline:
            # a steady trickle of other keys: the destination visibly works
            asyncio.run(produce(broker, topic, [(k.encode(), _event(k, sent)) for k in others]))
            sent += 1
            time.sleep(0.3)
        assert asyncio.run(wait_drained(broker, group, topic, timeout=60))
    finally:
        assert stop_worker(proc) == 0
    per_key: dict[str, list[int]] = defaultdict(list)
    for k, n in _applied(data / "applied.db"):
        per_key[k].append(n)
    assert "b3" not in per_key
    assert all(per_key[k] == list(range(sent)) for k in others)
    parked = _parked(data)
    assert sorted(json.loads(p.value)["payload"]["n"] for p in parked) == list(range(5))
    assert {(p.stage, p.error_class) for p in parked} == {("sink", "TransientStoreError")}


def test_rebalance_mid_stream_loses_nothing(fresh_stack: LocalStack, tmp_path: Path) -> None:
    """A second worker joins mid-stream, so the first has work revoked; after both stop, a third worker
    finishes from the committed offsets: every event is applied at least once.

    noida-db answers an offset commit sent during a rebalance with IllegalGeneration (Kafka answers
    RebalanceInProgress), after which aiokafka rejoins as a new member and the group can stall until
    the rebalance timeout; so this test does not require the two-worker group to drain, only that
    revocation never acknowledges unfinished work. The broker is restarted before the third worker.
    """
    assert fresh_stack.info is not None
    topic, group = "reb-in", "reb-app"
    broker = f"kafka://{fresh_stack.info.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    keys = [f"r{i}" for i in range(16)]
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_SLOW_MS": "100"}
    first = start_worker(APP, tmp_path / "w1", broker, env)
    second = None
    try:
        asyncio.run(produce(broker, topic, _records(keys, 100)))
        _wait(lambda: len(_applied(tmp_path / "w1" / "applied.db")) >= 200, 60, "first worker progress")
        second = start_worker(APP, tmp_path / "w2", broker, env)
        log = tmp_path / "w1" / "worker.log"
        revoked = "unfinished left to redelivery"
        _wait(lambda: revoked in log.read_text(), 30, "a revocation in the first worker")
    finally:
        # a member stuck in noida-db's JoinGroup does not stop on SIGINT; it is killed after 5 s
        stop_worker(first, timeout=5)
        if second is not None:
            stop_worker(second, timeout=5)
    fresh_stack.restart()
    third = start_worker(APP, tmp_path / "w3", broker, {**env, "ORDER_SLOW_MS": "0"})
    try:
        # the first two may have drained the group already: still let the third start up before
        # it is stopped (a SIGINT during interpreter start-up exits 1)
        _wait(lambda: read_status(tmp_path / "w3" / "counters.json", third.pid), 60, "third worker running")
        assert asyncio.run(wait_drained(broker, group, topic, timeout=90))
    finally:
        assert stop_worker(third) == 0
    seen: dict[str, set[int]] = defaultdict(set)
    for w in ("w1", "w2", "w3"):
        for k, n in _applied(tmp_path / w / "applied.db"):
            seen[k].add(n)
    assert {k: seen[k] for k in keys} == {k: set(range(100)) for k in keys}


def test_a_group_wedged_by_a_killed_member_is_reported(stack: StackInfo, tmp_path: Path) -> None:
    """The embedded broker never evicts a member killed with SIGKILL, so a worker started in
    its group gets no assignment: it must say so (log and status), not sit silent. (A killed
    converge worker of this host is removed by the group watch; this member is not one.)"""
    topic, group = f"wedge-{uuid.uuid4().hex[:8]}", f"wedge-app-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 2}))
    env = {"ORDER_TOPIC": topic, "ORDER_APP_ID": group, "ORDER_JOIN_TIMEOUT": "3"}
    leave_a_dead_outsider(stack.kafka_bootstrap, group, [topic])
    data = tmp_path / "w2"
    second = start_worker(APP, data, broker, env)
    try:
        log = data / "worker.log"
        _wait(lambda: log.exists() and "no partitions assigned" in log.read_text(errors="replace"), 60,
              "the stalled-join error")  # fmt: skip
        assert "restart noida-db or use a new group id" in log.read_text(errors="replace")
        assert second.poll() is None  # alive, and saying so again every period:
        _wait(lambda: log.read_text(errors="replace").count("no partitions assigned") >= 2, 30, "repeat")
    finally:
        stop_worker(second, timeout=5)  # stuck in JoinGroup: it does not stop on SIGINT
