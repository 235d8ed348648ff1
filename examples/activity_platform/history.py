"""A generated history: events in arrival order, the ground truth and delivery statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.event_types import TOPIC_ACTIVITIES, TOPIC_INSIGHTS, topic_of
from examples.activity_platform.truth import Truth
from framework.core.events import Event

__all__ = ["History", "HistoryStats", "measure"]


@dataclass(frozen=True)
class HistoryStats:
    """What a history exercises.

    ``out_of_order``: first deliveries older (lower version) than an event of
    the same ordering key delivered before them. ``insight_first``: hub rows
    whose first insight arrived before any of their activity events.
    """

    distinct: int
    delivered: int
    duplicates: int
    replayed: int
    delayed: int
    out_of_order: int
    insight_first: int


@dataclass(frozen=True)
class History:
    """``events`` in arrival order (with duplicates and replays) and the ``truth`` they converge to."""

    seed: int
    events: tuple[Event, ...]
    truth: Truth
    stats: HistoryStats

    def by_topic(self) -> dict[str, list[Event]]:
        """The arrival order split per topic (each agent consumes its own topic)."""
        out: dict[str, list[Event]] = {}
        for e in self.events:
            out.setdefault(topic_of(e.type), []).append(e)
        return out

    def distinct(self) -> list[Event]:
        """Each event once, in order of first arrival."""
        seen: set[str] = set()
        out = []
        for e in self.events:
            if e.event_id not in seen:
                seen.add(e.event_id)
                out.append(e)
        return out


def measure(arrival: Sequence[Event], duplicates: int, replayed: int, delayed: int) -> HistoryStats:
    """Statistics of an arrival order."""
    seen: set[str] = set()
    newest: dict[str, int] = {}
    out_of_order = 0
    first_topic: dict[str, str] = {}
    for e in arrival:
        if e.event_id in seen:
            continue
        seen.add(e.event_id)
        if e.version < newest.get(e.ordering_key, -1):
            out_of_order += 1
        newest[e.ordering_key] = max(e.version, newest.get(e.ordering_key, -1))
        topic = topic_of(e.type)
        if topic in (TOPIC_ACTIVITIES, TOPIC_INSIGHTS):
            first_topic.setdefault(e.ordering_key, topic)
    insight_first = sum(1 for t in first_topic.values() if t == TOPIC_INSIGHTS)
    return HistoryStats(len(seen), len(arrival), duplicates, replayed, delayed, out_of_order, insight_first)
