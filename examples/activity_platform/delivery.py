"""How planned events reach the agents: latency, lag, shuffles, delays, duplicates, replays.

Pure functions of a random generator and the distinct events in source order;
they return the arrival order (events may appear more than once).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.event_types import TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS, topic_of
from examples.activity_platform.lives import DAY, HOUR, MIN, SEC
from framework.core.events import Event

__all__ = ["DeliveryPlan", "deliver"]

#: Pipeline latency range (microseconds) per topic, before lags and delays.
_LATENCY: Mapping[str, tuple[int, int]] = {
    TOPIC_ACTIVITIES: (20_000, 2 * SEC),
    TOPIC_ENGAGEMENT: (5_000, 300_000),
    TOPIC_INSIGHTS: (200_000, 45 * SEC),
}


@dataclass(frozen=True)
class DeliveryPlan:
    """Knobs of the delivery; rates are shares of the distinct events."""

    duplicate_rate: float = 0.05
    replay_rate: float = 0.05
    delay_rate: float = 0.02
    shuffle_window: int = 8


@dataclass(frozen=True)
class Delivered:
    """The arrival order and what was done to produce it."""

    events: list[Event]
    duplicates: int
    replayed: int
    delayed: int


def _org_lags(rng: random.Random, orgs: Sequence[str]) -> dict[str, int]:
    """Activity-ingestion lag per organisation: most none, some minutes, a few days (backfills)."""
    lags = {}
    for org in orgs:
        r = rng.random()
        lags[org] = (
            0 if r < 0.6 else rng.randint(10 * MIN, 2 * HOUR) if r < 0.85 else rng.randint(DAY, 3 * DAY)
        )
    return lags


def deliver(
    rng: random.Random, events: Sequence[Event], orgs: Sequence[str], plan: DeliveryPlan
) -> Delivered:
    """The arrival order of ``events`` (distinct, in source order) under ``plan``."""
    lags = _org_lags(rng, orgs)
    produced: list[tuple[int, str, Event]] = []
    delayed = 0
    for e in events:
        topic = topic_of(e.type)
        at = e.version + rng.randint(*_LATENCY[topic])
        if topic == TOPIC_ACTIVITIES:
            at += lags[str(e.payload["org_id"])]
        if rng.random() < plan.delay_rate:
            at += rng.randint(30 * MIN, 2 * DAY)
            delayed += 1
        produced.append((at, e.event_id, e))
    produced.sort(key=lambda p: (p[0], p[1]))
    arrival = [p[2] for p in produced]
    w = max(1, plan.shuffle_window)
    for i in range(0, len(arrival), w):
        window = arrival[i : i + w]
        rng.shuffle(window)
        arrival[i : i + w] = window
    n_dup = round(plan.duplicate_rate * len(events))
    for i in sorted(rng.sample(range(len(arrival)), min(n_dup, len(arrival))), reverse=True):
        arrival.insert(i + 1 + rng.randint(0, 3), arrival[i])
    replayed = 0
    target = round(plan.replay_rate * len(events))
    while replayed < target and len(arrival) > 1:
        length = min(rng.randint(5, 20), target - replayed, len(arrival) - 1)
        start = rng.randint(0, len(arrival) - length - 1)
        at = rng.randint(start + length + 1, len(arrival))
        arrival[at:at] = arrival[start : start + length]
        replayed += length
    return Delivered(arrival, n_dup, replayed, delayed)
