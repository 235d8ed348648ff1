"""Seeking to the committed offsets, with a real aiokafka consumer on the session's noida-db.

The case that stalled a worker: a consumer has fetched to the end of a partition
that has no committed offset (or one at 0), and the seek that is to fetch its
dropped records again must take it back to the start, not leave it at the end.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import StackInfo
from framework.runtime.committed_seek import seek_committed, seek_committed_everywhere


async def _read_to_end(
    stack: StackInfo, topic: str, reset: str = "earliest"
) -> tuple[AIOKafkaConsumer, TopicPartition]:
    await ensure_topics(stack.kafka_bootstrap, {topic: 1})
    assert await produce(stack.kafka_bootstrap, topic, [(b"k", b"v%d" % i) for i in range(10)]) == 10
    consumer = AIOKafkaConsumer(bootstrap_servers=stack.kafka_bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                enable_auto_commit=False, auto_offset_reset=reset)  # fmt: skip
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    read = 0
    while read < 10:
        batch = await consumer.getmany(tp, timeout_ms=2000)
        read += sum(len(records) for records in batch.values())
    assert await consumer.position(tp) == 10
    return consumer, tp


async def test_no_committed_offset_goes_back_to_the_start(stack: StackInfo) -> None:
    consumer, tp = await _read_to_end(stack, f"seek-{uuid.uuid4().hex[:8]}")
    try:
        await consumer.seek_to_committed()  # aiokafka's own: leaves the position at the end
        assert await consumer.position(tp) == 10
        assert await seek_committed(consumer) == {tp: None}
        assert await consumer.position(tp) == 0
        again = await consumer.getmany(tp, timeout_ms=2000)
        assert [r.value for r in again[tp]][:1] == [b"v0"]  # the records are fetched again
    finally:
        await consumer.stop()


async def test_a_commit_at_zero_or_above_is_where_it_goes(stack: StackInfo) -> None:
    consumer, tp = await _read_to_end(stack, f"seek-{uuid.uuid4().hex[:8]}")
    try:
        for committed in (0, 4):
            await consumer.commit({tp: OffsetAndMetadata(committed, "")})
            assert await seek_committed(consumer) == {tp: committed}
            assert await consumer.position(tp) == committed
    finally:
        await consumer.stop()


async def test_latest_policy_without_a_commit_goes_to_the_end(stack: StackInfo) -> None:
    consumer, tp = await _read_to_end(stack, f"seek-{uuid.uuid4().hex[:8]}", reset="latest")
    try:
        consumer.seek(tp, 3)
        await seek_committed(consumer)
        assert await consumer.position(tp) == 10
    finally:
        await consumer.stop()


class StandInThread:
    """Stands in for Faust's consumer thread (no such thread runs outside a worker): runs the
    call on this loop and hands out the real consumer."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    def _ensure_consumer(self) -> AIOKafkaConsumer:
        return self.consumer

    async def call_thread(self, fun: Any, *args: Any) -> Any:
        return await fun(*args)


async def test_the_thread_step_is_replaced_once(stack: StackInfo) -> None:
    consumer, tp = await _read_to_end(stack, f"seek-{uuid.uuid4().hex[:8]}")
    try:
        thread = StandInThread(consumer)
        assert seek_committed_everywhere(thread) and seek_committed_everywhere(thread)
        assert await thread.seek_to_committed() == {tp: None}  # type: ignore[attr-defined]
        assert await consumer.position(tp) == 0
        assert not seek_committed_everywhere(object())
    finally:
        await consumer.stop()
