"""The change feed: which partitions of a projection a batch changed, announced after the write.

A change record is an event of type ``partitions_changed`` on the
projection's change topic. It lists changed partitions (key and the highest
version written into each), all of which hash to the Kafka partition the
record is sent to: the partition Kafka's default partitioner gives the
document id. So one projector sees every change of a document, in order,
and a micro-batch costs one record per change-topic partition instead of
one per changed partition. Records of type ``partition_changed`` (one
partition each, keyed by the document id) are still read.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka.partitioner import murmur2

from framework.core.events import Event, EventError
from framework.core.mutations import Mutation
from framework.core.projection import PartitionKey, Projection
from framework.core.schema import SchemaError

__all__ = [
    "CHANGE_TYPE",
    "CHANGES_TYPE",
    "ChangeRecord",
    "ChangeFeedSink",
    "change_partition",
    "change_records",
    "changed_partitions",
    "partition_record",
]

CHANGE_TYPE = "partition_changed"
CHANGES_TYPE = "partitions_changed"

#: Most changes one record lists (a record stays well under the 1 MiB event limit).
MAX_CHANGES_PER_RECORD = 1000

#: ``(kafka partition, key, value)`` of one change record.
ChangeRecord = tuple[int, bytes, bytes]


def change_partition(doc_id: str, partitions: int) -> int:
    """The change-topic partition of a document: Kafka's default partitioner on its id."""
    return _doc_hash(doc_id) % partitions


@functools.lru_cache(maxsize=65_536)
def _doc_hash(doc_id: str) -> int:
    """murmur2 of the id as Kafka's partitioner takes it (pure Python, so documents that change
    again are not hashed again)."""
    hashed: int = murmur2(doc_id.encode())
    return hashed & 0x7FFFFFFF


def change_records(
    batch: Iterable[tuple[Event, Iterable[Mutation]]], projection: Projection, partitions: int
) -> list[ChangeRecord]:
    """The records announcing every partition of ``projection`` the batch changed, each once
    at the highest version the batch wrote into it, grouped by change-topic partition."""
    latest: dict[str, tuple[PartitionKey, int, int]] = {}
    for event, mutations in batch:
        for doc_id, (key, version) in projection.touched(mutations).items():
            seen = latest.get(doc_id)
            if seen is None or version > seen[1]:
                latest[doc_id] = (key, version, event.occurred_at)
    groups: dict[int, list[tuple[str, PartitionKey, int, int]]] = {}
    for doc_id, (key, version, occurred) in latest.items():
        groups.setdefault(change_partition(doc_id, partitions), []).append((doc_id, key, version, occurred))
    records: list[ChangeRecord] = []
    for part, changes in sorted(groups.items()):
        for i in range(0, len(changes), MAX_CHANGES_PER_RECORD):
            records.append(_record(projection, part, changes[i : i + MAX_CHANGES_PER_RECORD]))
    return records


def _record(
    projection: Projection, part: int, changes: list[tuple[str, PartitionKey, int, int]]
) -> ChangeRecord:
    listed = [{"key": dict(key), "version": version} for _, key, version, _ in changes]
    content = repr(sorted((doc_id, version) for doc_id, _, version, _ in changes)).encode()
    digest = hashlib.blake2b(content, digest_size=12).hexdigest()
    ordering_key = f"{projection.name}/{part}"
    event = Event(
        event_id=f"{ordering_key}/{digest}",
        ordering_key=ordering_key,
        version=max(v for _, _, v, _ in changes),
        occurred_at=max(o for _, _, _, o in changes),
        type=CHANGES_TYPE,
        payload={"projection": projection.name, "changes": listed},
    )
    return part, ordering_key.encode(), event.to_json()


def partition_record(
    projection: Projection, key: PartitionKey, version: int, occurred_at: int
) -> tuple[bytes, bytes]:
    """``(kafka key, value)`` of a record naming one partition (``partition_changed``), keyed by
    its document id: Kafka's default partitioner sends it where ``change_records`` would."""
    doc_id = projection.document_id(key)
    event = Event(
        event_id=f"{projection.name}/{doc_id}/{version}",
        ordering_key=doc_id,
        version=version,
        occurred_at=occurred_at,
        type=CHANGE_TYPE,
        payload={"projection": projection.name, "key": dict(key)},
    )
    return doc_id.encode(), event.to_json()


def changed_partitions(event: Event, projection: Projection) -> list[PartitionKey]:
    """The partition keys a change record names; EventError when it is not a change of
    ``projection`` or a key is malformed."""
    if event.type not in (CHANGE_TYPE, CHANGES_TYPE):
        raise EventError("type", f"expected {CHANGES_TYPE} or {CHANGE_TYPE}, got {event.type!r}")
    if event.payload.get("projection") != projection.name:
        raise EventError("payload.projection", f"not a change of {projection.name!r}")
    if event.type == CHANGE_TYPE:
        return [_checked_key(event.payload.get("key"), projection, "payload.key")]
    changes = event.payload.get("changes")
    if not isinstance(changes, list) or not changes:
        raise EventError("payload.changes", "missing, empty or not a list")
    keys = [c.get("key") if isinstance(c, Mapping) else None for c in changes]
    return [_checked_key(key, projection, f"payload.changes[{i}].key") for i, key in enumerate(keys)]


def _checked_key(key: Any, projection: Projection, where: str) -> PartitionKey:
    if not isinstance(key, Mapping):
        raise EventError(where, "missing or not an object")
    try:
        projection.tables[0].check_key(key, partition_only=True)
    except SchemaError as exc:
        raise EventError(where, str(exc)) from exc
    return dict(key)


class ChangeFeedSink:
    """Announces the partitions events changed to each projection's change topic.

    ``publish(topic, records)`` sends ``(partition, key, value)`` records and
    returns only when the broker has all of them, so the source events are
    acknowledged after their announcements. ``partitions`` gives each change
    topic's partition count.
    """

    name = "change_feed"

    def __init__(
        self,
        publish: Callable[[str, Sequence[ChangeRecord]], Awaitable[None]],
        topics: Mapping[str, Projection],
        partitions: Mapping[str, int],
    ) -> None:
        self._publish = publish
        self.topics = dict(topics)
        missing = set(self.topics) - set(partitions)
        if missing:
            raise ValueError(f"no partition count for change topics {sorted(missing)}")
        self.partitions = {t: int(partitions[t]) for t in self.topics}
        empty = sorted(t for t, n in self.partitions.items() if n < 1)
        if empty:
            raise ValueError(f"change topics without partitions: {empty}")

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        await self.write_batch([(event, mutations)])

    async def write_batch(self, batch: Sequence[tuple[Event, Sequence[Mutation]]]) -> None:
        for topic, projection in self.topics.items():
            records = change_records(batch, projection, self.partitions[topic])
            if records:
                await self._publish(topic, records)
