"""The Kafka helpers on the embedded broker: batched produce, group settling, staged drain."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from framework.kafka_admin import (
    ensure_topics,
    group_assignments,
    produce,
    wait_all_drained,
    wait_group_settled,
)
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_workers
from tests.dlq.kafka_support import read_topic


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _by_partition(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = {}
    for m in asyncio.run(read_topic(bootstrap, topic)):
        out.setdefault(m.partition, []).append((m.key, m.value))
    return out


def test_produce_puts_each_record_on_its_keys_partition_in_order(stack: StackInfo) -> None:
    """Batched sends keep what one ``send`` per record gave: the default partitioner's
    partition for the key and the order of the input within a partition."""
    broker, topic = f"kafka://{stack.kafka_bootstrap}", _name("produce")
    asyncio.run(ensure_topics(broker, {topic: 3}))
    # values of up to 3 KB, so partitions span several 16 KB batches
    records = [(b"k%d" % (i % 11), b"%d:" % i + b"x" * (i % 3000)) for i in range(2_000)]
    assert asyncio.run(produce(broker, topic, records)) == len(records)
    stored = _by_partition(stack.kafka_bootstrap, topic)
    pick = DefaultPartitioner()
    expected: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(3)}
    for key, value in records:
        expected[pick(key, [0, 1, 2], [0, 1, 2])].append((key, value))
    assert stored == expected


def test_produce_sends_a_record_larger_than_a_batch(stack: StackInfo) -> None:
    broker, topic = f"kafka://{stack.kafka_bootstrap}", _name("produce-big")
    asyncio.run(ensure_topics(broker, {topic: 1}))
    big = b"y" * 100_000
    assert asyncio.run(produce(broker, topic, [(b"a", b"small"), (b"a", big), (b"a", b"after")])) == 3
    assert _by_partition(stack.kafka_bootstrap, topic) == {
        0: [(b"a", b"small"), (b"a", big), (b"a", b"after")]
    }


def test_wait_group_settled_sees_every_member_holding_partitions(stack: StackInfo, tmp_path: Path) -> None:
    """Two Faust workers of the smoke app: settled once both hold partitions; waiting for a
    third member times out with the state it saw."""
    broker, topic, group = f"kafka://{stack.kafka_bootstrap}", _name("settle"), _name("g")
    asyncio.run(ensure_topics(broker, {topic: 4}))
    env = {"SMOKE_TOPIC": topic, "SMOKE_APP_ID": group}
    procs = [start_worker("examples.smoke:build", tmp_path / f"w{i}", broker, env) for i in range(2)]
    try:
        asyncio.run(wait_group_settled(broker, group, 2, timeout=90))
        state, held = asyncio.run(group_assignments(broker, group))
        with pytest.raises(TimeoutError) as e:
            asyncio.run(wait_group_settled(broker, group, 3, timeout=1))
    finally:
        assert stop_workers(procs) == [0, 0]
    assert state == "Stable"
    assert sorted(p for h in held for p in h.get(topic, [])) == [0, 1, 2, 3]
    assert all(h.get(topic) for h in held)
    assert "did not settle with 3 members" in str(e.value)
    assert "Stable with 2 members" in str(e.value)


def test_wait_all_drained_reads_a_later_stages_ends_only_once_the_earlier_is_drained(
    stack: StackInfo,
) -> None:
    """Stage two gets its records while stage one drains: it counts as drained only once its
    end offsets, read after stage one's commits, are committed too."""
    broker = f"kafka://{stack.kafka_bootstrap}"
    first, second, group = _name("stage1"), _name("stage2"), _name("g")
    asyncio.run(ensure_topics(broker, {first: 1, second: 1}))
    asyncio.run(produce(broker, first, [(b"k", b"%d" % i) for i in range(10)]))

    async def commit(topic: str, offset: int) -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=stack.kafka_bootstrap, group_id=group, enable_auto_commit=False
        )
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0)])
            await c.commit({TopicPartition(topic, 0): offset})
        finally:
            await c.stop()

    second_committing = asyncio.Event()

    async def pipeline() -> None:
        await asyncio.sleep(0.5)
        await produce(broker, second, [(b"k", b"%d" % i) for i in range(5)])  # stage 1's output
        await commit(first, 10)
        await asyncio.sleep(1.0)
        second_committing.set()
        await commit(second, 5)

    async def scenario() -> tuple[bool, bool, bool]:
        early = await wait_all_drained(broker, group, [first, second], timeout=0.3, poll=0.1)
        task = asyncio.ensure_future(pipeline())
        drained = await wait_all_drained(broker, group, [first, second], timeout=30, poll=0.1)
        after_second = second_committing.is_set()
        await task
        return early, drained, after_second

    early, drained, after_second = asyncio.run(scenario())
    assert not early
    assert drained and after_second
