"""A generated history, and its delivery as a real pipeline would scramble it.

``History.events`` are in source (version) order, each once. ``deliver``
gives an arrival order: each event is late by a random number of places
(a few usually, hundreds sometimes), and some arrive twice (the same event
id and version: a redelivery). Enrichment computed right after a ticket's
creation then often arrives before the created event.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from examples.support_desk.payloads import SPECS, TOPIC_ENRICHMENT
from examples.support_desk.truth import Truth
from framework import Event

__all__ = ["History", "deliver", "by_topic", "enrichment_first"]


@dataclass(frozen=True)
class History:
    """The events of a history in source order, and the ``truth`` they converge to."""

    seed: int
    events: tuple[Event, ...]
    truth: Truth


def deliver(events: Sequence[Event], seed: int, duplicates: float = 0.08) -> list[Event]:
    """``events`` in a scrambled arrival order with about ``duplicates`` of them delivered twice."""
    rng = random.Random(seed)
    arrivals: list[tuple[float, int, Event]] = []
    for i, e in enumerate(events):
        late = rng.expovariate(1 / 6) + (rng.uniform(50, 400) if rng.random() < 0.03 else 0)
        arrivals.append((i + late, len(arrivals), e))
        if rng.random() < duplicates:
            arrivals.append((i + late + rng.uniform(1, 200), len(arrivals), e))
    return [e for _, _, e in sorted(arrivals, key=lambda a: (a[0], a[1]))]


def by_topic(events: Sequence[Event]) -> dict[str, list[Event]]:
    """``events`` split per topic, each list in the given order."""
    out: dict[str, list[Event]] = {}
    for e in events:
        out.setdefault(SPECS[e.type].topic, []).append(e)
    return out


def enrichment_first(arrival: Sequence[Event]) -> int:
    """Tickets whose first enrichment event arrives before their created event."""
    first: dict[str, str] = {}
    for e in arrival:
        if e.type == "ticket.created" or SPECS[e.type].topic == TOPIC_ENRICHMENT:
            first.setdefault(e.ordering_key, e.type)
    return sum(1 for t in first.values() if t != "ticket.created")
