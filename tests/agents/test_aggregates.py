"""The activity platform's aggregates (``examples.activity_platform.aggregates``) through the test
kit's Driver: every total equals the oracle's, computed by plain loops from the history's ground
truth (``expected_totals``), for the generator's own arrival order (shuffles, lagging ingestion,
duplicates, replayed bursts) and for any delivery of the in-order pass; meetings rescheduled to
another day and re-created after a cancellation move between windows, cancellations delete, the
CRM's ID mutation moves an owner's counts to its final id, and an erasure retracts the subject's
activities and engagements."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.oracle import Totals, expected_totals
from examples.id_requests import plan_requests
from framework import Event
from framework.erasure.declare import Subject
from framework.erasure.keyed import ENV_KEY
from framework.erasure.run import erase
from framework.testing import Driver, deliveries
from tests.agents.replay import in_order
from tests.idmutation.test_resolution_activity import owners_of, run
from tests.support.aggregate_moves import moved_entities

NAMES = ("engagement_daily", "owner_daily")


def _totals(d: Driver) -> Totals:
    return {name: d.totals(name) for name in NAMES}


def test_the_generators_arrival_order_ends_in_the_oracles_totals() -> None:
    h = generate_history(2024, 600, n_orgs=3)
    assert h.stats.duplicates and h.stats.replayed and h.stats.out_of_order
    with Driver(app) as d:
        assert d.send(h.events) == []
        totals = _totals(d)
    expected = expected_totals(h.truth, h.distinct())
    assert all(len(expected[name]) > 20 for name in NAMES), {k: len(v) for k, v in expected.items()}
    assert totals == expected
    cancelled = sum(t.cancelled_at is not None for t in h.truth.activities.values())
    assert cancelled and moved_entities(app, in_order(h)) > 0


@pytest.mark.parametrize("seed", [1, 8])
def test_the_id_mutation_moves_an_owners_counts_to_its_final_id(seed: int) -> None:
    history = generate_history(seed, 400, n_orgs=3)
    plan = plan_requests(seed, owners_of(history))
    with run(history, plan, seed) as d:
        totals = _totals(d)
    expected = expected_totals(history.truth, history.distinct(), plan.requests)
    assert expected["owner_daily"] != expected_totals(history.truth, history.distinct())["owner_daily"]
    assert totals == expected


def test_an_erasure_retracts_the_subjects_activities_and_engagements(monkeypatch: pytest.MonkeyPatch) -> None:
    h = generate_history(5, 700, n_orgs=3)
    actors = Counter(str(e.payload["actor"]).lower() for e in h.distinct() if "actor" in e.payload)
    address = next(a for a, _ in actors.most_common() if not a.endswith("-corp.example"))  # a sender
    key = b"aggregate-erasure-key-0123456789"
    monkeypatch.setenv(ENV_KEY, key.decode())
    with Driver(app) as d:
        assert d.send(h.events) == []
        before = _totals(d)
        assert before == expected_totals(h.truth, h.distinct())
        d.run(
            erase(
                app, Subject("email", address), key=key, store=d.store, index=d.index, aggregates=d.aggregates
            )
        )
        totals = _totals(d)
    expected = expected_totals(h.truth, h.distinct(), erased=[address])
    assert expected["engagement_daily"] != before["engagement_daily"]
    assert totals == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), n=st.integers(1, 20), n_orgs=st.integers(1, 2), data=st.data())
def test_every_total_equals_the_oracle_for_any_delivery(
    seed: int, n: int, n_orgs: int, data: st.DataObject
) -> None:
    """The generator's arrival order (its own disorder, duplicates and replays), then a delivery
    of the in-order pass drawn here (shuffled, duplicated, a replayed tail): the totals are the
    oracle's after each."""
    h = generate_history(seed, n, n_orgs=n_orgs, horizon_days=3)
    order: list[Event] = data.draw(deliveries(in_order(h), max_duplicates=4), label="delivery")
    expected = expected_totals(h.truth, h.distinct())
    event("groups: " + ", ".join(f"{name} {len(expected[name])}" for name in NAMES if expected[name]))
    with Driver(app) as d:
        assert d.send(h.events) == []
        assert _totals(d) == expected
    with Driver(app) as d:
        assert d.send(order) == []
        assert _totals(d) == expected
