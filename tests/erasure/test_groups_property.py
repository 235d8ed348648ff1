"""Property: erasing a subject removes its aggregate groups for good, whatever the delivery (test kit).

The app (``visits_app``) groups visits by their owner's address (a personal group part, in any
spelling) and day, windows final a day after they end, and by site. A random history: visits
each of one owner (every write of a visit names the same address, spelled at random), versions
spaced 1 µs, 1 ms, 1 s or days apart, delivered shuffled and duplicated; one or two owners are
erased (requested in a random spelling) at a random point, with the windows final or not; then
more replays and the whole archive again. The model, written here: each visit's latest write,
the erased owners' visits left out, counted per (owner as spelled, UTC day) and per site.
After it the totals equal the model's, no row of any table holds an erased address in any
spelling, ``verify`` finds no residue, and no query returns an erased owner's group.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.aggregates.query import Queries
from framework.core.aggregate import group_id
from framework.core.events import Event
from framework.erasure import Subject, erase, verify
from framework.testing import Driver
from tests.erasure.conftest import KEY
from tests.erasure.histories import delivery, respell
from tests.erasure.visits_app import DAY_S, app

_KEY = KEY.encode()
OWNERS = ("ann@x.io", "bo.li@y.org", "cy@z.net")
SITES = ("north", "south")
BASE = 1_700_000_000_000_000
SPACINGS = (1, 1_000, 1_000_000, DAY_S * 1_000_000, 3 * DAY_S * 1_000_000)


def _history(rng: random.Random, spacing: int) -> list[Event]:
    owner_of = {f"v{i}": rng.choice(OWNERS) for i in range(rng.randint(1, 6))}
    events = []
    for n in range(1, rng.randint(1, 14) + 1):
        visit = rng.choice(sorted(owner_of))
        version = BASE + n * spacing
        payload = {"visit_id": visit, "owner": respell(rng, owner_of[visit]), "site": rng.choice(SITES),
                   "minutes": rng.randint(1, 90), "at": version}  # fmt: skip
        events.append(Event(f"e{n}", visit, version, version, "visit.set", payload))
    return events


def _model(events: list[Event], erased: set[str]) -> tuple[dict, dict]:
    latest: dict[str, Event] = {}
    for e in events:
        v = e.payload["visit_id"]
        if v not in latest or latest[v].version < e.version:
            latest[v] = e
    daily: dict[str, dict[str, float]] = {}
    sites: dict[str, dict[str, float]] = {}
    for e in latest.values():
        p = e.payload
        if p["owner"].lower() in erased:
            continue
        g = daily.setdefault(
            group_id([p["owner"]], p["at"] // 1_000_000 // DAY_S * DAY_S), {"visits": 0, "minutes": 0}
        )
        g["visits"] += 1
        g["minutes"] += p["minutes"]
        sites.setdefault(group_id([p["site"]]), {"visits": 0})["visits"] += 1
    return daily, sites


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from(SPACINGS), st.integers(0, 1000), st.booleans())
def test_erased_owners_groups_are_gone_for_good(
    rng: random.Random, spacing: int, cut: int, final: bool
) -> None:
    events = _history(rng, spacing)
    erased = set(rng.sample(OWNERS, rng.randint(1, 2)))
    sent = delivery(rng, events)
    at = cut % (len(sent) + 1)
    with Driver(app) as d:
        if final:  # every window final: a change to one is a revision, kept in its totals row
            d.now = BASE / 1_000_000 + 30 * DAY_S
        d.send(sent[:at])
        d.send(sent[:at])  # a replay before the erasure
        for value in sorted(erased):
            report = d.run(erase(app, Subject("email", respell(rng, value)), key=_KEY, store=d.store,
                                 aggregates=d.aggregates))  # fmt: skip
            assert report.rows.get("visits_daily_contrib", 0) >= 0
        d.send(sent[at:])
        d.send(delivery(rng, events))  # replays, then the whole archive again
        d.send(events)
        daily, sites = _model(events, erased)
        assert d.totals("visits_daily") == daily
        assert d.totals("by_site") == sites
        for table in app.tables:
            for row in d.rows(table.name):
                texts = [str(v).lower() for v in (*row.key.values(), *row.values().values())]
                assert not [t for t in texts if any(a in t for a in erased)], (table.name, row.key)
        for value in erased:
            assert d.run(verify(app, Subject("email", value.upper()), key=_KEY, store=d.store)) == []
        queries = Queries(d.store, app.views, clock=lambda: d.now)
        spelled = {e.payload["owner"] for e in events if e.payload["owner"].lower() in erased}
        days = {e.payload["at"] // 1_000_000 // DAY_S * DAY_S for e in events}
        for owner in spelled:
            assert d.run(queries.windows("visits_daily", {"owner": owner})).windows == []
            for day in days:
                assert not d.run(queries.total("visits_daily", {"owner": owner}, day)).found
        top = d.run(queries.top("visits_daily", "visits", limit=1000))
        assert not [g for g in top.groups if str(g.group["owner"]).lower() in erased]
        assert len(top.groups) == len(daily)
        assert not d.parked
