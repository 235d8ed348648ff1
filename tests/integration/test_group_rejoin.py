"""A commit answered IllegalGeneration in a rebalance no longer leaves a member behind on noida-db.

Real parts: the session's noida-db and plain aiokafka consumers. Consumer A commits
every few milliseconds; consumer B joins the group, so A's commits meet the
rebalance and noida-db answers them IllegalGeneration. aiokafka then forgets A's
member id and rejoins under a new one; noida-db keeps the forgotten member, which
never rejoins, and the group never settles. With ``leave_before_rejoin`` on A's
coordinator the group settles with two members.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, KafkaError

from framework.kafka_admin import ensure_topics, group_assignments, produce, wait_group_settled
from framework.local_stack import StackInfo
from framework.runtime.group_rejoin import leave_before_rejoin

SETTLE_S = 25.0


async def _consume(consumer: AIOKafkaConsumer, stop: asyncio.Event, commits: list[int]) -> None:
    """Fetch and commit in a tight loop (a busy worker), counting commits answered with an error."""
    while not stop.is_set():
        await consumer.getmany(timeout_ms=20)
        try:
            await consumer.commit()
        except (CommitFailedError, KafkaError):
            commits.append(1)
        await asyncio.sleep(0.005)


async def _scenario(boot: str) -> tuple[str, int, int]:
    topic, group = f"rejoin-{uuid.uuid4().hex[:8]}", f"rejoin-{uuid.uuid4().hex[:8]}"
    await ensure_topics(f"kafka://{boot}", {topic: 4})
    await produce(f"kafka://{boot}", topic, [(b"k%d" % i, b"v") for i in range(2000)])

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=boot, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_poll_records=5)  # fmt: skip

    a, b = consumer(), consumer()
    stop, failed = asyncio.Event(), []
    await a.start()
    tasks = []
    try:
        assert leave_before_rejoin(a._coordinator)  # noqa: SLF001 - the coordinator under test
        tasks.append(asyncio.ensure_future(_consume(a, stop, failed)))
        await wait_group_settled(f"kafka://{boot}", group, 1, SETTLE_S)
        await b.start()
        tasks.append(asyncio.ensure_future(_consume(b, stop, failed)))
        try:
            await wait_group_settled(f"kafka://{boot}", group, 2, SETTLE_S)
        except TimeoutError:
            pass
        state, held = await group_assignments(f"kafka://{boot}", group)
        return state, len(held), len(failed)
    finally:
        stop.set()
        for t in tasks:
            with contextlib.suppress(Exception):
                await t
        for c in (b, a):  # without the fix a stop waits on a JoinGroup that is never answered
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(c.stop(), 10)


def test_a_member_whose_commit_met_the_rebalance_rejoins_as_itself(stack: StackInfo) -> None:
    state, members, failed_commits = asyncio.run(_scenario(stack.kafka_bootstrap))
    assert failed_commits > 0, "no commit met the rebalance: the scenario exercised nothing"
    assert (state, members) == ("Stable", 2)


async def _empty_assignment_scenario(boot: str) -> tuple[int, list[int]]:
    """The first sync's answer replaced by empty bytes (a fake of the broker's answer: noida-db gave
    one once, under load, and cannot be made to); the member joins again and gets its partitions."""
    topic, group = f"rejoin-{uuid.uuid4().hex[:8]}", f"rejoin-{uuid.uuid4().hex[:8]}"
    await ensure_topics(f"kafka://{boot}", {topic: 4})
    consumer = AIOKafkaConsumer(bootstrap_servers=boot, group_id=group, enable_auto_commit=False)
    emptied: list[bytes] = []
    await consumer.start()
    try:
        coordinator = consumer._coordinator  # noqa: SLF001 - the coordinator under test
        assert leave_before_rejoin(coordinator)
        real = coordinator._on_join_complete  # noqa: SLF001

        async def first_one_empty(generation: int, member: str, protocol: str, assignment: bytes) -> None:
            if not emptied:
                emptied.append(assignment)
                assignment = b""
            await real(generation, member, protocol, assignment)

        coordinator._on_join_complete = first_one_empty  # noqa: SLF001
        consumer.subscribe([topic])  # the first join starts here, after the fake is in place
        await wait_group_settled(f"kafka://{boot}", group, 1, SETTLE_S)
        return len(emptied), sorted(t.partition for t in consumer.assignment())
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer.stop(), 10)


def test_a_sync_answer_that_does_not_decode_makes_the_member_join_again(stack: StackInfo) -> None:
    emptied, held = asyncio.run(_empty_assignment_scenario(stack.kafka_bootstrap))
    assert emptied == 1, "the sync was never answered empty: the scenario exercised nothing"
    assert held == [0, 1, 2, 3]
