"""The support desk's requester ids converted, merged and deleted by the CRM: generated histories
with ID mutation requests, delivered scrambled through the test driver with the job run at random
points (``Driver.id_job``: the batch side's moves and the stream's map), and late ticket events
held back until after the last run; ``requester_ticket`` equals the oracle and the rest of the
state is unchanged."""

from __future__ import annotations

import random

import pytest

from examples.id_requests import IdPlan, plan_requests
from examples.support_desk.agents import TicketAgent
from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import History, deliver
from examples.support_desk.oracle import expected_requester_tickets, row_cells
from framework import Event, Upsert
from framework.testing import Driver
from tests.examples.support_desk.builders import CREATED, REF, event
from tests.examples.support_desk.compare import divergences


def owners_of(history: History) -> list[tuple[str, str, str, int]]:
    return [(e.event_id, e.payload["tenant"], e.payload["requester_id"], e.version)
            for e in history.events if e.type == "ticket.created"]  # fmt: skip


def run(history: History, plan: IdPlan, seed: int) -> Driver:
    """Deliver ``history`` scrambled with the plan's requests and job runs interleaved; half the
    late events arrive only after the last job run."""
    rng = random.Random(seed)
    held = set(plan.late[::2])
    arrival: list[object] = [e for e in deliver(history.events, seed) if e.event_id not in held]
    for r in plan.requests:
        arrival.insert(rng.randrange(len(arrival) + 1), r)
    for _ in range(4):
        arrival.insert(rng.randrange(len(arrival) + 1), rng.choice(("apply", "publish", "both")))
    d = Driver(app)
    known = []
    for item in arrival:
        if isinstance(item, Event):
            assert d.send(item) == []
        elif isinstance(item, str):
            d.id_job(known, apply=item != "publish", publish=item != "apply")
        else:
            known.append(item)
    d.id_job(plan.requests)
    tail = [e for e in history.events if e.event_id in held]
    assert d.send(tail + tail[::3]) == []
    return d


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_requester_tickets_follow_the_crm_and_the_rest_is_unchanged(seed: int) -> None:
    history = generate_history(seed, 40)
    plan = plan_requests(seed, owners_of(history))
    counts = plan.counts()
    assert counts["convert"] and counts["merge"] and counts["delete"] and counts["late"] >= 2
    with run(history, plan, seed) as d:
        rows = {(r.key["tenant"], r.key["requester_id"], r.key["ticket_id"]): row_cells(r)
                for r in d.rows("requester_ticket")}  # fmt: skip
        assert rows == expected_requester_tickets(history.events, plan.requests)
        found = divergences(history, d.rows("ticket"), d.rows("ticket_status_log"),
                            d.rows("ticket_comment"), d.documents("tickets"))  # fmt: skip
        assert found == []


def test_without_requests_the_rows_stay_under_the_ids_the_events_carry() -> None:
    history = generate_history(5, 20)
    with Driver(app) as d:
        d.send(list(history.events))
        rows = {(r.key["tenant"], r.key["requester_id"], r.key["ticket_id"]): row_cells(r)
                for r in d.rows("requester_ticket")}  # fmt: skip
        assert rows == expected_requester_tickets(history.events) and len(rows) == 20


def test_a_created_event_naming_its_requester_writes_the_owner_row() -> None:
    ms = list(
        TicketAgent().handle(event("ticket.created", version=7, occurred_at=5, requester_id="p1", **CREATED))
    )
    assert ms[1] == Upsert(
        "requester_ticket",
        {"tenant": "acme", "requester_id": "p1", "ticket_id": REF.ticket_id},
        {"source": "zendesk", "external_id": "4711", "created_at": 5},
        7,
    )
    assert len(list(TicketAgent().handle(event("ticket.created", version=7, **CREATED)))) == 1
