"""Properties: erasure leaves no subject in the example apps' aggregates, whatever the delivery (test kit).

The activity platform's ``owner_daily`` groups by the CRM owner (``owner_id``, personal data of
kind ``owner``). Histories written here: activities (emails and meetings, re-created with new
versions), each logged against one owner, versions spaced 1 µs, 1 ms, 1 s or days apart,
delivered shuffled and duplicated; an owner is erased at a random point, then replays and the
whole archive again. The model, written here: each activity's latest created event under its
owner, the erased owner's left out, counted per (organisation, owner, UTC day of creation).

The support desk groups by no personal data: its requesters (``email``) are in no group key.
Its generated histories, versions re-spaced the same ways (order kept), are delivered the same
way with a requester erased; the model: an erasure of requester cells changes no aggregate, so
the totals equal those of one clean in-order pass without the erasure. Both: no aggregate
table, nor any other table, holds the subject, ``verify`` finds no residue.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.identity import hub_id, ordering_key
from examples.activity_platform.app import app as platform
from examples.support_desk.app import app as desk
from examples.support_desk.generator import generate_history
from framework.aggregates.query import Queries
from framework.aggregates.tables import tables_of
from framework.core.aggregate import group_id
from framework.core.events import Event
from framework.erasure import Subject, erase, verify
from framework.erasure.find import finder
from framework.testing import Driver
from tests.erasure.conftest import KEY
from tests.erasure.histories import delivery

_KEY = KEY.encode()
DAY = 86_400_000_000
BASE = 1_717_200_000_000_000
SPACINGS = (1, 1_000, 1_000_000, DAY, 3 * DAY)
ORGS = ("org-a", "org-b")
OWNERS = ("lead-01", "lead-02", "contact-03")


def _activities(rng: random.Random, spacing: int) -> list[Event]:
    acts = {f"x{i}": (rng.choice(ORGS), rng.choice(OWNERS)) for i in range(rng.randint(1, 6))}
    events = []
    for n in range(1, rng.randint(1, 12) + 1):
        ext = rng.choice(sorted(acts))
        org, owner = acts[ext]
        v = BASE + n * spacing
        kind = rng.choice(("email", "meeting"))
        body = {"org_id": org, "source": "crm", "external_id": ext, "subject": f"s{n}", "body_preview": "",
                "participants": ["pat@x.io"], "owner_id": owner}  # fmt: skip
        when = {"sent_at": v} if kind == "email" else {"starts_at": v, "ends_at": v + 60_000_000}
        events.append(
            Event(
                f"a{n}", ordering_key(org, hub_id(org, "crm", ext)), v, v, f"{kind}.created", {**body, **when}
            )
        )
    return events


def _owner_model(events: list[Event], erased: str) -> dict[str, dict[str, float]]:
    latest: dict[tuple[str, str, str], Event] = {}
    for e in events:
        p = e.payload
        k = (p["org_id"], p["owner_id"], p["external_id"])
        if k not in latest or latest[k].version < e.version:
            latest[k] = e
    out: dict[str, dict[str, float]] = {}
    for (org, owner, _), e in latest.items():
        if owner == erased:
            continue
        g = out.setdefault(
            group_id([org, owner], e.occurred_at // DAY * 86_400), {"emails": 0, "meetings": 0}
        )
        g["emails" if e.type.startswith("email") else "meetings"] += 1
    return out


def _residue(d: Driver, app: object, value: str) -> list[str]:
    find = finder(value)
    out = []
    for table in app.tables:  # type: ignore[attr-defined]
        for row in d.rows(table.name):
            if any(find(str(v)) for v in (*row.key.values(), *row.values().values())):
                out.append(table.name)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from(SPACINGS), st.integers(0, 1000))
def test_activity_platform_erased_owner_leaves_no_group(rng: random.Random, spacing: int, cut: int) -> None:
    events = _activities(rng, spacing)
    owner = rng.choice(OWNERS)
    sent = delivery(rng, events)
    at = cut % (len(sent) + 1)
    with Driver(platform) as d:
        d.send(sent[:at])
        d.run(erase(platform, Subject("owner", owner), key=_KEY, store=d.store, index=d.index,
                    aggregates=d.aggregates))  # fmt: skip
        d.send(sent[at:])
        d.send(delivery(rng, events))
        d.send(events)
        assert d.totals("owner_daily") == _owner_model(events, owner)
        assert _residue(d, platform, owner) == []
        assert d.run(verify(platform, Subject("owner", owner), key=_KEY, store=d.store, index=d.index)) == []
        queries = Queries(d.store, platform.views, clock=lambda: d.now)
        for org in ORGS:
            assert d.run(queries.windows("owner_daily", {"org_id": org, "owner_id": owner})).windows == []
        top = d.run(queries.top("owner_daily", "emails", limit=1000))
        assert not [g for g in top.groups if g.group["owner_id"] == owner]
        assert not d.parked


def _respaced(events: list[Event], spacing: int) -> list[Event]:
    """``events`` with versions re-spaced by rank (equal versions stay equal, order kept)."""
    rank = {v: n for n, v in enumerate(sorted({e.version for e in events}))}
    return [dataclasses.replace(e, version=BASE + rank[e.version] * spacing) for e in events]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10_000), st.sampled_from(SPACINGS), st.randoms(use_true_random=False), st.integers(0, 1000)
)
def test_support_desk_erasure_leaves_aggregates_as_they_were(
    seed: int, spacing: int, rng: random.Random, cut: int
) -> None:
    events = _respaced(list(generate_history(seed, 4).events), spacing)
    requesters = Counter(
        str(e.payload["requester_email"]).lower() for e in events if "requester_email" in e.payload
    )
    address = sorted(requesters)[rng.randrange(len(requesters))]
    with Driver(desk) as clean:
        clean.send(events)
        expected = {a.name: clean.totals(a) for a in desk.aggregates}
    sent = delivery(rng, events)
    at = cut % (len(sent) + 1)
    with Driver(desk) as d:
        d.send(sent[:at])
        d.run(erase(desk, Subject("email", address.upper()), key=_KEY, store=d.store, index=d.index,
                    aggregates=d.aggregates))  # fmt: skip
        d.send(sent[at:])
        d.send(delivery(rng, events))
        d.send(events)
        assert {a.name: d.totals(a) for a in desk.aggregates} == expected
        aggregate_tables = {t.name for a in desk.aggregates for t in tables_of(a).all}
        assert not set(_residue(d, desk, address)) & aggregate_tables
        assert d.run(verify(desk, Subject("email", address), key=_KEY, store=d.store, index=d.index)) == []
