"""Publishing events to an app's topics, for app teams' tools and tests: ``framework.publish``.

Each ``Event`` goes to the topic the app routes it to (``App.topic_of``: the agent or lookup
topic declaring its type), keyed by its ``ordering_key`` (so every event of one entity lands on
one partition, in the order given), its value the event's JSON (``Event.to_json``), which a
worker parses back. A thin layer over ``framework.kafka_admin.produce``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, cast

from framework.core.events import Event
from framework.kafka_admin import ensure_topics, produce

__all__ = ["publish", "Routes"]


class Routes(Protocol):
    """What ``publish`` needs of an app: the topic an event belongs on (``App.topic_of``)."""

    def topic_of(self, event: Event) -> str: ...


async def publish(
    broker: str,
    events: Iterable[Event],
    app: Routes | None = None,
    *,
    topic: str | None = None,
    partitions: int | None = None,
) -> dict[str, int]:
    """Send ``events`` to the broker and wait until it has them all; the count sent per topic.

    ``broker`` is a broker URL (``kafka://HOST:PORT``, what ``CONVERGE_BROKER`` holds, or
    ``HOST:PORT``). Each event goes to ``topic`` when given, else to the topic ``app`` routes
    it to (``App.topic_of``; an event no agent or lookup declares raises ``EventError`` before
    anything is sent). The Kafka key is the event's ``ordering_key``: the events of one key
    land on one partition, in the order given. ``partitions``: create any missing topic with
    that many partitions first (give the workers' ``CONVERGE_PARTITIONS``); None leaves that to
    the worker, which creates its topics when it starts, so start it first. Call it with ``await``, or
    ``asyncio.run(publish(...))`` from a script.

    ``ValueError`` when neither ``app`` nor ``topic`` is given.
    """
    if app is None and topic is None:
        raise ValueError("publish: give the app (its topic routing) or a topic")
    by_topic: dict[str, list[tuple[bytes, bytes]]] = {}
    for event in events:
        target = topic if topic is not None else cast(Routes, app).topic_of(event)
        by_topic.setdefault(target, []).append((event.ordering_key.encode(), event.to_json()))
    if partitions is not None and by_topic:
        await ensure_topics(broker, {t: partitions for t in by_topic})
    return {t: await produce(broker, t, records) for t, records in by_topic.items()}
