"""Realistic, deterministic event histories of the reference activity platform.

``generate_history(seed, n_events)`` plans the lives of many activities in
many organisations (emails with engagement, meetings updated, rescheduled,
cancelled and sometimes re-created, insights and sharing), keeps the first
``n_events`` source changes in source-time (version) order, and delivers them
as a real pipeline would (``delivery``): per-topic latency, lagging activity
ingestion for some organisations (insights and engagement then arrive before
the main record), shuffles within small windows, a few long delays, ~5% exact
duplicates and replayed bursts of old events (same event id, same version).
The same seed gives the same history.
"""

from __future__ import annotations

import random

from examples.activity_platform.content import make_org
from examples.activity_platform.delivery import DeliveryPlan, deliver
from examples.activity_platform.history import History, measure
from examples.activity_platform.lives import DAY, LifePlanner, Planned
from examples.activity_platform.truth import ActivityTruth, Truth

__all__ = ["generate_history", "START_MICROS"]

#: Source time of the first activity: 2024-03-01T00:00:00Z in microseconds.
START_MICROS = 1_709_251_200_000_000


def generate_history(
    seed: int,
    n_events: int,
    n_orgs: int = 8,
    *,
    meeting_share: float = 0.45,
    horizon_days: int = 30,
    delivery: DeliveryPlan | None = None,
) -> History:
    """A history of ``n_events`` distinct events over ``n_orgs`` organisations, deterministic per seed."""
    if n_events < 1 or n_orgs < 1:
        raise ValueError("generate_history: n_events and n_orgs must be positive")
    rng = random.Random(seed)
    orgs = [make_org(rng, i) for i in range(n_orgs)]
    planner = LifePlanner(rng)
    horizon = horizon_days * DAY
    while len(planner.items) < n_events * 3 // 2 + 5:
        org = rng.choice(orgs)
        t0 = START_MICROS + rng.randrange(horizon)
        if rng.random() < meeting_share:
            planner.meeting(org, t0)
        else:
            planner.email(org, t0)
    kept = sorted(planner.items, key=lambda p: (p.event.version, p.event.event_id))[:n_events]
    truth = _fold(kept)
    delivered = deliver(rng, [p.event for p in kept], [o.org_id for o in orgs], delivery or DeliveryPlan())
    stats = measure(delivered.events, delivered.duplicates, delivered.replayed, delivered.delayed)
    return History(seed, tuple(delivered.events), truth, stats)


def _fold(kept: list[Planned]) -> Truth:
    truth = Truth()
    for p in kept:
        hub = p.ref.hub_id
        if hub not in truth.activities:
            truth.activities[hub] = ActivityTruth(hub, p.ref.org_id, p.ref.source, p.ref.external_id, p.kind)
        truth.activities[hub].apply(p.effect, p.event.version, p.event.event_id)
    return truth
