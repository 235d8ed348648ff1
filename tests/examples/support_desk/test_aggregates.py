"""The support desk's aggregates (``examples.support_desk.aggregates``) through the test kit's
Driver: every total equals the oracle's, computed by plain loops from the history's ground truth
(``expected_totals``); status changes and assignees set or cleared move tickets between groups,
solving takes them out, a late earlier agent comment moves a first response to its day, and the
requester erasures in the histories change nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver
from examples.support_desk.oracle import Totals, expected_totals
from framework import Event
from framework.testing import Driver, deliveries
from tests.support.aggregate_moves import moved_entities

NAMES = ("open_tickets", "first_response")


def _totals(d: Driver) -> Totals:
    return {name: d.totals(name) for name in NAMES}


def test_the_in_order_pass_ends_in_the_oracles_totals() -> None:
    h = generate_history(8, 200)
    assert any(t.erased_at is not None for t in h.truth.tickets.values())
    with Driver(app) as d:
        assert d.send(h.events) == []
        totals = _totals(d)
    expected = expected_totals(h.truth)
    assert all(len(expected[name]) > 20 for name in NAMES), {k: len(v) for k, v in expected.items()}
    assert any("next_due" in m for m in expected["open_tickets"].values())
    assert totals == expected
    assert moved_entities(app, list(h.events)) > 0


def test_a_late_earlier_agent_comment_moves_the_first_response() -> None:
    """Ticket ``3-0``'s second agent comment arrives before its first one, whose version is below
    the ticket's mark by then: the first response becomes the earlier comment's (the contribution
    changes at the same mark)."""
    h = generate_history(3, 3)
    order = deliver(h.events, 3)
    answers = [
        e.version
        for e in order
        if e.ordering_key.endswith("/3-0") and e.payload.get("author_kind") == "agent"
    ]
    assert len(answers) == 2 and answers[0] > answers[1]
    with Driver(app) as d:
        assert d.send(order) == []
        assert _totals(d) == expected_totals(h.truth)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), n_tickets=st.integers(1, 3), data=st.data())
def test_every_total_equals_the_oracle_for_any_delivery(
    seed: int, n_tickets: int, data: st.DataObject
) -> None:
    """The history delivered as its ``deliver`` scrambles it (late events, redeliveries), and a
    delivery drawn here (shuffled, duplicated, a replayed tail): the totals are the oracle's
    after each."""
    h = generate_history(seed, n_tickets)
    order: list[Event] = data.draw(deliveries(h.events, max_duplicates=4), label="delivery")
    expected = expected_totals(h.truth)
    event("groups: " + ", ".join(f"{name} {len(expected[name])}" for name in NAMES if expected[name]))
    with Driver(app) as d:
        assert d.send(deliver(h.events, seed)) == []
        assert _totals(d) == expected
    with Driver(app) as d:
        assert d.send(order) == []
        assert _totals(d) == expected
