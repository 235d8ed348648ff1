"""Small Kafka helpers for the demo, tests and jobs: topics, producing, group progress."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.protocol.group import LeaveGroupRequest

__all__ = [
    "ensure_topics",
    "produce",
    "end_offsets",
    "committed_offsets",
    "wait_drained",
    "wait_all_drained",
    "group_assignments",
    "wait_group_settled",
    "GroupMember",
    "GroupReading",
    "GroupReader",
    "leave_group",
]


def _bootstrap(broker: str) -> str:
    return broker.split("://", 1)[-1]


async def ensure_topics(broker: str, topics: Mapping[str, int]) -> None:
    """Create each topic with its partition count when missing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(broker))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            try:
                await admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()


async def produce(broker: str, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> int:
    """Send keyed records and wait until the broker has them all; returns the count.

    Records go to the partition aiokafka's default partitioner picks for their key (the one a
    Faust or Java producer picks), in order, packed into one batch per partition at a time,
    which costs a fraction of a ``send`` per record.
    """
    producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(broker), linger_ms=5, acks="all")
    await producer.start()
    n = 0
    try:
        partitions = sorted(await producer.partitions_for(topic))
        pick = DefaultPartitioner()
        open_batches: dict[int, BatchBuilder] = {}
        sent: list[asyncio.Future[Any]] = []
        for key, value in records:
            partition = pick(key, partitions, partitions)
            batch = open_batches.get(partition)
            if batch is None or batch.append(key=key, value=value, timestamp=None) is None:
                if batch is not None:
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
                batch = open_batches[partition] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    raise ValueError(f"a record of {len(value)} bytes does not fit in a batch")
            n += 1
        for partition, batch in open_batches.items():
            sent.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return n


async def end_offsets(broker: str, topic: str) -> dict[int, int]:
    """The log-end offset of every partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), enable_auto_commit=False)
    await consumer.start()
    try:
        return {tp.partition: off for tp, off in (await _ends(consumer, topic)).items()}
    finally:
        await consumer.stop()


async def committed_offsets(broker: str, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The group's committed offset per partition (-1 when none)."""
    consumer = _group_client(broker, group)
    await consumer.start()
    try:
        return {p: await _committed(consumer, TopicPartition(topic, p)) for p in partitions}
    finally:
        await consumer.stop()


def _group_client(broker: str, group: str) -> AIOKafkaConsumer:
    """A client that reads ``group``'s commits without joining it (it never subscribes)."""
    return AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), group_id=group, enable_auto_commit=False)


async def _ends(consumer: AIOKafkaConsumer, topic: str) -> dict[TopicPartition, int]:
    parts = consumer.partitions_for_topic(topic)
    if parts is None:
        await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
        parts = consumer.partitions_for_topic(topic) or set()
    return dict(await consumer.end_offsets([TopicPartition(topic, p) for p in sorted(parts)]))


async def _committed(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
    c = await consumer.committed(tp)
    return -1 if c is None else c


async def wait_drained(broker: str, group: str, topic: str, timeout: float, poll: float = 0.5) -> bool:
    """Wait until ``group`` has committed the end of every partition of ``topic`` (an empty
    partition, which a group never commits, counts as drained)."""
    return await wait_all_drained(broker, group, [topic], timeout, poll)


async def wait_all_drained(
    broker: str, group: str, topics: Iterable[str], timeout: float, poll: float = 0.5
) -> bool:
    """``wait_drained`` for each topic in turn, through one client. Give a pipeline's topics in
    stage order: a topic's end offsets are read once the topics before it are drained, so
    records a later stage gets from an earlier one are all counted."""
    deadline = time.monotonic() + timeout
    consumer = _group_client(broker, group)
    await consumer.start()
    try:
        for topic in topics:
            pending = {tp: end for tp, end in (await _ends(consumer, topic)).items() if end > 0}
            while pending:
                pending = {tp: end for tp, end in pending.items() if await _committed(consumer, tp) < end}
                if not pending:
                    break
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(poll)
        return True
    finally:
        await consumer.stop()


async def group_assignments(broker: str, group: str) -> tuple[str, list[dict[str, list[int]]]]:
    """The group's state (``Stable``, ``PreparingRebalance``, ``Dead``...) and, per member,
    the partitions it holds by topic."""
    admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(broker))
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    state, members = _described(response)
    return state, [m.holds for m in members]


def _described(response: Any) -> tuple[str, list[GroupMember]]:
    _error, _group, state, _ptype, _protocol, members = response.groups[0][:6]
    out = []
    for member_id, client_id, client_host, _meta, raw in (m[:5] for m in members):
        assignment = ConsumerProtocolMemberAssignment.decode(raw).assignment if raw else []
        out.append(GroupMember(member_id, client_id, client_host,
                               {topic: sorted(parts) for topic, parts in assignment}))  # fmt: skip
    return state, out


async def wait_group_settled(
    broker: str, group: str, members: int, timeout: float, poll: float = 0.25
) -> None:
    """Wait until ``group`` is Stable with ``members`` members, each holding a partition: data
    produced after that is not met by the rebalance of a member still joining. Raises
    ``TimeoutError`` naming the last state seen."""
    deadline = time.monotonic() + timeout
    while True:
        state, held = await group_assignments(broker, group)
        if state == "Stable" and len(held) == members and all(any(h.values()) for h in held):
            return
        if time.monotonic() >= deadline:
            counts = [sum(map(len, h.values())) for h in held]
            raise TimeoutError(
                f"group {group!r} did not settle with {members} members in {timeout:.0f} s:"
                f" last seen {state} with {len(held)} members holding {counts} partitions"
            )
        await asyncio.sleep(poll)


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group as the broker describes it, with the partitions it holds."""

    member_id: str
    client_id: str
    client_host: str
    holds: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupReading:
    """One reading of a group from the broker: its state and members, the end offset of every
    partition of the topics read and the group's committed offset there (absent: none)."""

    state: str
    members: tuple[GroupMember, ...]
    ends: dict[tuple[str, int], int]
    committed: dict[tuple[str, int], int]

    def owner(self, topic: str, partition: int) -> GroupMember | None:
        """The member holding the partition, None when no member does."""
        return next((m for m in self.members if partition in m.holds.get(topic, ())), None)


class GroupReader:
    """Reads a group's progress from the broker through two clients kept open between readings:
    an admin client (group description, committed offsets, removing a member) and a consumer
    outside the group (end offsets). Used by a worker's group watch."""

    def __init__(self, broker: str, group: str) -> None:
        self.broker, self.group = _bootstrap(broker), group
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def read(self, topics: Sequence[str]) -> GroupReading:
        """The group and the offsets of every partition of ``topics`` now."""
        admin, consumer = await self._clients()
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            for tp, end in (await _ends(consumer, topic)).items():
                ends[(tp.topic, tp.partition)] = end
        (response,) = await admin.describe_consumer_groups([self.group])
        state, members = _described(response)
        parts = [TopicPartition(t, p) for t, p in sorted(ends)]
        offsets = await admin.list_consumer_group_offsets(self.group, partitions=parts) if parts else {}
        committed = {(tp.topic, tp.partition): om.offset for tp, om in offsets.items() if om.offset >= 0}
        return GroupReading(state, tuple(members), ends, committed)

    async def members(self) -> tuple[str, tuple[GroupMember, ...]]:
        """The group's state and members now."""
        admin, _ = await self._clients()
        (response,) = await admin.describe_consumer_groups([self.group])
        state, members = _described(response)
        return state, tuple(members)

    async def remove_member(self, member_id: str) -> str:
        """Send LeaveGroup for ``member_id`` (of any process); the broker's answer, by error name
        (``NoError``, ``UnknownMemberIdError``...)."""
        admin, _ = await self._clients()
        node = await admin.find_coordinator(self.group)
        response = await admin._send_request_to_node(node, LeaveGroupRequest(self.group, member_id))  # noqa: SLF001
        return for_code(response.error_code).__name__

    async def close(self) -> None:
        """Close both clients (a later reading opens them again)."""
        admin, consumer, self._admin, self._consumer = self._admin, self._consumer, None, None
        for client in (admin, consumer):
            if client is not None:
                try:
                    await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
                except (KafkaError, OSError):
                    pass

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None or self._consumer is None:
            await self.close()
            admin = AIOKafkaAdminClient(bootstrap_servers=self.broker)
            consumer = AIOKafkaConsumer(bootstrap_servers=self.broker, enable_auto_commit=False)
            try:
                await admin.start()
                await consumer.start()
            except BaseException:
                await admin.close()
                await consumer.stop()
                raise
            self._admin, self._consumer = admin, consumer
        return self._admin, self._consumer


async def leave_group(broker: str, group: str, client_id: str, member_ids: Sequence[str] = ()) -> list[str]:
    """Remove from ``group`` (LeaveGroup, through connections of their own) ``member_ids`` and every
    member whose client id is ``client_id``, whatever the group's state; the member ids the broker
    removed. For a process's own members (a unique client id) once its consumer stopped."""
    reader = GroupReader(broker, group)
    try:
        _state, members = await reader.members()
        ids = list(dict.fromkeys([*member_ids, *(m.member_id for m in members if m.client_id == client_id)]))
        return [m for m in ids if await reader.remove_member(m) == "NoError"]
    finally:
        await reader.close()
