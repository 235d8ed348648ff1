"""``framework.publish`` on the embedded broker: each event on the topic the app routes it to, keyed
by its ordering key (so on that key's partition, in the order given), its value the event's JSON;
missing topics created with ``partitions``; nothing sent for an event no agent declares."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.partitioner import DefaultPartitioner

from framework import App, Event, KeyedAgent, TableSchema, Upsert, publish
from framework.core.events import EventError, parse_event
from framework.core.schema import Column
from framework.kafka_admin import end_offsets
from framework.local_stack import StackInfo
from tests.dlq.kafka_support import read_topic

NOTE = TableSchema("note", (Column("note_id", "text"),), (Column("text", "text"),))


def _app(suffix: str) -> App:
    class Notes(KeyedAgent):
        name = "notes"
        topic = f"notes-{suffix}"
        tables = (NOTE,)
        event_types = ("note.set",)

        def handle(self, event: Event) -> list[Upsert]:
            return [Upsert("note", {"note_id": event.ordering_key}, dict(event.payload), event.version)]

    class Tags(Notes):
        name = "tags"
        topic = f"tags-{suffix}"
        event_types = ("tag.set",)

    return App(f"notes-{suffix}", agents=[Notes(), Tags()])


def _event(i: int, kind: str, key: str) -> Event:
    return Event(f"e{i}", key, 10 + i, 10 + i, kind, {"text": f"t{i}"})


def test_events_go_to_their_topic_keyed_by_their_ordering_key(stack: StackInfo) -> None:
    suffix = uuid.uuid4().hex[:8]
    app = _app(suffix)
    events = [_event(i, "note.set" if i % 3 else "tag.set", f"k{i % 7}") for i in range(60)]
    broker = f"kafka://{stack.kafka_bootstrap}"
    counts = asyncio.run(publish(broker, events, app, partitions=3))
    assert counts == {f"notes-{suffix}": 40, f"tags-{suffix}": 20}
    pick = DefaultPartitioner()
    for topic, kind in ((f"notes-{suffix}", "note.set"), (f"tags-{suffix}", "tag.set")):
        records = asyncio.run(read_topic(stack.kafka_bootstrap, topic))
        assert {r.partition for r in records} <= {0, 1, 2}
        for r in records:
            assert r.partition == pick(r.key, [0, 1, 2], [0, 1, 2])
            assert parse_event(r.value).ordering_key.encode() == r.key
        by_partition: dict[int, list[str]] = {}
        for r in sorted(records, key=lambda r: (r.partition, r.offset)):
            by_partition.setdefault(r.partition, []).append(parse_event(r.value).event_id)
        sent = [e for e in events if e.type == kind]
        for partition, ids in by_partition.items():  # each partition in the order given
            assert ids == [
                e.event_id for e in sent if pick(e.ordering_key.encode(), [0, 1, 2], [0, 1, 2]) == partition
            ]
        assert sorted(r.value for r in records) == sorted(e.to_json() for e in sent)


def test_a_given_topic_and_an_unrouted_event(stack: StackInfo) -> None:
    suffix = uuid.uuid4().hex[:8]
    broker = stack.kafka_bootstrap  # HOST:PORT works too
    one = f"one-{suffix}"
    assert asyncio.run(publish(broker, [_event(1, "any.type", "k")], topic=one, partitions=1)) == {one: 1}
    app = _app(suffix)
    with pytest.raises(EventError, match="no agent"):
        asyncio.run(
            publish(broker, [_event(2, "note.set", "k"), _event(3, "other.set", "k")], app, partitions=1)
        )
    assert f"notes-{suffix}" not in asyncio.run(_topics(broker))  # nothing sent, nothing created
    with pytest.raises(ValueError, match="give the app"):
        asyncio.run(publish(broker, []))
    assert asyncio.run(end_offsets(f"kafka://{broker}", one)) == {0: 1}


async def _topics(broker: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()
