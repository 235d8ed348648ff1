"""GroupWatch: the group's lag and stalls from the broker, and dead members removed.

The stall rules are checked on given readings with a given clock; lag, ownership and
the removal of a dead member against the session's noida-db with real consumers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.kafka_admin import GroupMember, GroupReading, ensure_topics, produce, wait_group_settled
from framework.local_stack import StackInfo
from framework.runtime.group_watch import GroupWatch, dead_here, member_client_id


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _reading(committed: dict[tuple[str, int], int], ends: dict[tuple[str, int], int],
             holder: dict[str, list[int]] | None = None) -> GroupReading:  # fmt: skip
    members = (GroupMember("m-1", "converge-h-1", "/127.0.0.1", {"t": holder["t"]}),) if holder else ()
    return GroupReading("Stable", members, ends, committed)


def test_lag_without_a_commit_past_the_threshold_is_a_stall(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    watch = GroupWatch("127.0.0.1:1", "g", ["t"], stall_after=30.0, clock=clock)
    ends = {("t", 0): 100, ("t", 1): 50}
    caplog.set_level(logging.INFO, "framework.runtime.group_watch")
    watch.observe(_reading({("t", 0): 40, ("t", 1): 50}, ends, {"t": [0]}))
    for step in range(1, 7):  # partition 0 never moves; partition 1 has no lag
        clock.now += 10
        ends = {("t", 0): 100 + step, ("t", 1): 50}
        watch.observe(_reading({("t", 0): 40, ("t", 1): 50}, ends, {"t": [0]}))
    status = watch.status("t")
    assert status["stalled"] == {"t[0]": 60.0} and status["stalls"] == 1 and status["lag"] == 66
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2, errors  # when it started (30 s) and again after another 30 s
    assert "t[0] stalled: lag 63 and no commit for 30 s; held by converge-h-1" in errors[0]
    clock.now += 10
    watch.observe(_reading({("t", 0): 90, ("t", 1): 50}, {("t", 0): 107, ("t", 1): 50}))  # a commit: moves
    assert watch.status()["stalled"] == {} and watch.status()["stalls"] == 1
    assert any("t[0] moves again (lag 17)" in r.getMessage() for r in caplog.records)
    p = watch.partitions[("t", 0)]
    assert (p.lag, p.owner, p.stalled_s) == (17, None, 0.0)


def test_lag_that_keeps_shrinking_is_no_stall_and_nothing_committed_counts_the_whole_log() -> None:
    clock = Clock()
    watch = GroupWatch("127.0.0.1:1", "g", ["t"], stall_after=5.0, clock=clock)
    for step in range(10):
        clock.now += 4
        watch.observe(_reading({("t", 0): 10 * step}, {("t", 0): 1000, ("t", 1): 30}))
    assert watch.status()["stalled"] == {"t[1]": 36.0}  # nothing committed, never moved: 30 messages wait
    assert watch.partitions[("t", 0)].stalled_s < 5 and watch.status()["lag"] == 1000 - 90 + 30


def test_only_a_worker_of_this_host_and_pid_namespace_whose_process_is_gone_is_dead() -> None:
    host, ns = socket.gethostname(), os.stat("/proc/self/ns/pid").st_ino
    assert member_client_id() == f"converge-{host}-{ns}-{os.getpid()}"
    assert dead_here(f"converge-{host}-{ns}-123", alive=lambda pid: pid != 123)
    assert not dead_here(f"converge-{host}-{ns}-124", alive=lambda pid: pid != 123)
    assert not dead_here(f"converge-{host}-{ns + 1}-123", alive=lambda pid: False)  # another container
    assert not dead_here(f"converge-elsewhere-{ns}-123", alive=lambda pid: False)
    assert not dead_here("faust-0.15.3", alive=lambda pid: False)
    assert not dead_here(f"converge-{host}-{ns}-x1", alive=lambda pid: False)


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


async def _live_scenario(boot: str) -> tuple[GroupWatch, dict[int, int]]:
    topic, group = f"watch-{uuid.uuid4().hex[:8]}", f"watch-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{boot}"
    await ensure_topics(broker, {topic: 3})
    await produce(broker, topic, [(b"k%d" % i, b"v") for i in range(300)])
    dead_id = member_client_id(pid=_gone_pid())  # a member whose process is gone: what SIGKILL leaves
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=boot, group_id=group, client_id=dead_id,
                                enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
    await consumer.start()
    try:
        await wait_group_settled(broker, group, 1, 20)
        await consumer.getmany(timeout_ms=500)
        await consumer.commit({TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 11})
        ends = {tp.partition: e for tp, e in (await consumer.end_offsets(
            [TopicPartition(topic, p) for p in range(3)])).items()}  # fmt: skip
        watch = GroupWatch(boot, group, [topic])
        try:
            await watch.step()
        finally:
            await watch.reader.close()
        return watch, ends
    finally:
        await consumer.stop()


def test_lag_of_every_partition_from_the_broker_and_a_dead_member_removed(
    stack: StackInfo, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "framework.runtime.group_watch")
    watch, ends = asyncio.run(_live_scenario(stack.kafka_bootstrap))
    assert sum(ends.values()) == 300
    by_partition = {tp[1]: p for tp, p in watch.partitions.items()}
    assert {p: (x.end, x.committed) for p, x in by_partition.items()} == {
        0: (ends[0], 7), 1: (ends[1], 11), 2: (ends[2], None)}  # fmt: skip
    assert watch.status()["lag"] == 300 - 7 - 11
    assert all(x.owner is not None and x.owner.startswith("converge-") for x in by_partition.values())
    assert watch.members_removed == 1
    assert any("its process is gone" in r.getMessage() for r in caplog.records)


async def _leftover_scenario(boot: str) -> tuple[GroupWatch, str, str, set[str]]:
    """Two consumers under one client id: the first stands for a member id the worker gave up
    (a leftover), the second for its consumer now."""
    topic, group = f"own-{uuid.uuid4().hex[:8]}", f"own-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{boot}"
    await ensure_topics(broker, {topic: 2})
    client = member_client_id()

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=boot, group_id=group, client_id=client,
                                enable_auto_commit=False)  # no commit meets a rebalance here # fmt: skip

    old, now = consumer(), consumer()
    await old.start()
    await wait_group_settled(broker, group, 1, 20)
    await now.start()
    tasks = [asyncio.ensure_future(c.getmany(timeout_ms=8000)) for c in (old, now)]
    try:
        await wait_group_settled(broker, group, 2, 20)
        current = now._coordinator.member_id  # noqa: SLF001
        leftover = old._coordinator.member_id  # noqa: SLF001
        watch = GroupWatch(boot, group, [topic], own=lambda: (client, current))
        try:
            await watch.step()
            await asyncio.sleep(0.5)
            left = {m.member_id for m in (await watch.reader.read([topic])).members}
        finally:
            await watch.reader.close()
        return watch, leftover, current, left
    finally:
        for t in tasks:
            t.cancel()
        for c in (old, now):
            await asyncio.wait_for(c.stop(), 15)


@pytest.mark.timeout(120)
def test_a_member_id_the_worker_gave_up_is_removed_and_its_current_one_kept(stack: StackInfo) -> None:
    watch, leftover, current, left = asyncio.run(_leftover_scenario(stack.kafka_bootstrap))
    assert watch.members_removed == 1
    assert leftover not in left and current in left
