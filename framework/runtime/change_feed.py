"""The change feed: which partitions of a projection an event changed, announced after the write.

A change is an event of type ``partition_changed`` on the projection's
change topic, keyed by the document id, so the projector sees one
document's changes in order. Its version is the highest version the source
event wrote into that partition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from framework.core.events import Event, EventError
from framework.core.mutations import Mutation
from framework.core.projection import PartitionKey, Projection
from framework.core.schema import SchemaError

__all__ = ["CHANGE_TYPE", "change_events", "changed_partition", "ChangeFeedSink"]

CHANGE_TYPE = "partition_changed"


def change_events(event: Event, mutations: Iterable[Mutation], projection: Projection) -> list[Event]:
    """One change event per partition of ``projection`` that ``mutations`` touch."""
    return [
        Event(
            event_id=f"{event.event_id}/{projection.name}/{doc_id}",
            ordering_key=doc_id,
            version=version,
            occurred_at=event.occurred_at,
            type=CHANGE_TYPE,
            payload={"projection": projection.name, "key": dict(key)},
        )
        for doc_id, (key, version) in projection.touched(mutations).items()
    ]


def changed_partition(event: Event, projection: Projection) -> PartitionKey:
    """The partition key a change event names; EventError when it is not a change of ``projection``."""
    if event.type != CHANGE_TYPE:
        raise EventError("type", f"expected {CHANGE_TYPE}, got {event.type!r}")
    if event.payload.get("projection") != projection.name:
        raise EventError("payload.projection", f"not a change of {projection.name!r}")
    key = event.payload.get("key")
    if not isinstance(key, Mapping):
        raise EventError("payload.key", "missing or not an object")
    try:
        projection.tables[0].check_key(key, partition_only=True)
    except SchemaError as exc:
        raise EventError("payload.key", str(exc)) from exc
    return dict(key)


class ChangeFeedSink:
    """Announces the partitions events changed to each projection's change topic.

    ``publish(topic, records)`` sends ``(key, value)`` records and returns only
    when the broker has all of them, so the source events are acknowledged
    after their announcements. A batch announces each changed partition once,
    at the highest version the batch wrote into it.
    """

    name = "change_feed"

    def __init__(
        self,
        publish: Callable[[str, Sequence[tuple[bytes, bytes]]], Awaitable[None]],
        topics: Mapping[str, Projection],
    ) -> None:
        self._publish = publish
        self.topics = dict(topics)

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        await self.write_batch([(event, mutations)])

    async def write_batch(self, batch: Sequence[tuple[Event, Sequence[Mutation]]]) -> None:
        for topic, projection in self.topics.items():
            latest: dict[str, Event] = {}
            for event, mutations in batch:
                for change in change_events(event, mutations, projection):
                    seen = latest.get(change.ordering_key)
                    if seen is None or change.version > seen.version:
                        latest[change.ordering_key] = change
            if latest:
                await self._publish(topic, [(c.ordering_key.encode(), c.to_json()) for c in latest.values()])
