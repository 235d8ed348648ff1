"""The support desk through converge's test kit: pure agents, the oracle in memory, convergence.

The kit's ``Driver`` runs the worker's processing code on an in-memory store
and index (no broker); ``deliveries`` draws shuffles with duplicates and
replayed tails.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.support_desk.agents import MailAgent
from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import History, deliver
from examples.support_desk.identity import TicketRef
from examples.support_desk.oracle import Divergence
from framework import Event
from framework.state import Entry
from framework.testing import Driver, assert_pure, check_convergence, deliveries, make_event
from tests.examples.support_desk.compare import divergences
from tests.examples.support_desk.test_mail import reply

MALFORMED = b'{"event_id": "half'


def _unknown(key: str) -> Event:
    return make_event("ticket.merged", {"into": "9"}, key=key, version=1)


def _oracle_divergences(driver: Driver, history: History) -> list[Divergence]:
    return divergences(
        history,
        driver.rows("ticket"),
        driver.rows("ticket_status_log"),
        driver.rows("ticket_comment"),
        driver.documents("tickets"),
    )


def test_every_agent_is_pure_on_a_generated_history_and_on_bad_events() -> None:
    events = generate_history(5, 30).events
    for agent in app.agents:
        if agent.lookups:  # handle(event, state): below
            continue
        own = [e for e in events if e.type in agent.event_types]
        assert own, agent.name
        mutations = assert_pure(agent, [*own, _unknown(own[0].ordering_key)])
        assert all(mutations[:-1]) and mutations[-1] == [], agent.name


def test_the_mail_agent_is_pure_with_the_conversations_of_a_generated_history() -> None:
    """Each generated ticket owns a conversation (the entry its ``ticket.created`` would feed);
    replies to them, to an unknown conversation (Missing) and a reply missing fields."""
    created = [e for e in generate_history(5, 30).events if e.type == "ticket.created"]
    conversations = {f"thread-{i}": Entry(TicketRef.of(e).cells, e.version) for i, e in enumerate(created)}
    replies = [reply(f"m{i}", 1000 + i, conv) for i, conv in enumerate(conversations)]
    bad = Event("r-x", "thread-0", 1, 1, "reply.received", {"conversation_id": "thread-0"})
    lost = reply("lost", 5, "thread-unknown")
    mutations = assert_pure(MailAgent(), [*replies, lost, bad], state={"conversations": conversations})
    assert all(mutations[: len(replies)]) and mutations[len(replies) :] == [[], []]
    assert mutations[0][0].key["ticket_id"] == TicketRef.of(created[0]).ticket_id


def test_the_in_memory_driver_ends_in_the_oracle_state() -> None:
    history = generate_history(8, 60)
    key = history.events[0].ordering_key
    with Driver(app) as driver:
        parked = driver.send([MALFORMED, _unknown(key)], topic="support.tickets")  # as the worker gets them
        parked += driver.send(deliver(history.events, 8))
        found = _oracle_divergences(driver, history)
        documents = driver.documents("tickets")
    assert [(p.stage, type(p.error).__name__) for p in parked] == [
        ("parse", "EventError"),
        ("map", "UnknownEventType"),
    ]
    assert not found, "\n".join(map(str, found[:30]))
    assert len(documents) == 60


@st.composite
def histories(draw: st.DrawFn) -> list[Event | bytes]:
    """A generated history of one to three tickets, sometimes with a bad message in it."""
    events: list[Event | bytes] = list(
        generate_history(draw(st.integers(0, 2**32)), draw(st.integers(1, 3))).events
    )
    bad = draw(st.sampled_from([None, MALFORMED, _unknown(events[0].ordering_key)]))  # type: ignore[union-attr]
    if bad is not None:
        events.insert(draw(st.integers(0, len(events))), bad)
    return events


@pytest.mark.slow
def test_any_delivery_converges_to_the_in_order_pass() -> None:
    # the unknown type inserted by ``histories`` has no topic here: parked at route, as stated
    check_convergence(app, histories(), max_examples=300, allow_unrouted=True)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), n_tickets=st.integers(1, 4), data=st.data())
def test_any_delivery_ends_in_the_oracle_state(seed: int, n_tickets: int, data: st.DataObject) -> None:
    history = generate_history(seed, n_tickets)
    order = data.draw(deliveries(history.events), label="delivery")
    with Driver(app) as driver:
        assert driver.send(order) == []
        found = _oracle_divergences(driver, history)
    assert not found, "\n".join(map(str, found[:30]))
