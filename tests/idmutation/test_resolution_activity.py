"""The reference activity platform with the CRM's ID mutation: generated histories (activities
logged against leads and contacts), requests planned by ``examples.id_requests`` (chains, merges,
deletes, late events), delivered in the generator's scrambled order with the job run at random
points through the test driver and late created events held back until after the last run;
``owner_activity`` equals the oracle, and the hub rows and documents are unchanged."""

from __future__ import annotations

import random

import pytest

from agents import ActivitiesAgent
from agents.identity import ActivityRef
from examples.activity_platform import compare_documents, compare_rows, expected_state, row_cells
from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from examples.activity_platform.oracle import expected_owner_activities
from examples.id_requests import IdPlan, plan_requests
from framework import Event, Upsert
from framework.testing import Driver


def owners_of(history: History) -> list[tuple[str, str, str, int]]:
    return [(e.event_id, e.payload["org_id"], e.payload["owner_id"], e.version)
            for e in history.distinct() if "owner_id" in e.payload]  # fmt: skip


def run(history: History, plan: IdPlan, seed: int) -> Driver:
    rng = random.Random(seed)
    held = set(plan.late[::2])
    arrival: list[object] = [e for e in history.events if e.event_id not in held]
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
    assert d.send([e for e in history.distinct() if e.event_id in held]) == []
    return d


@pytest.mark.parametrize("seed", [1, 8])
def test_owner_activities_follow_the_crm_and_hub_rows_are_unchanged(seed: int) -> None:
    history = generate_history(seed, 400, n_orgs=3)
    plan = plan_requests(seed, owners_of(history))
    counts = plan.counts()
    assert min(counts.values()) > 0, counts
    with run(history, plan, seed) as d:
        rows = {(r.key["org_id"], r.key["owner_id"], r.key["hub_id"]): row_cells(r)
                for r in d.rows("owner_activity")}  # fmt: skip
        assert rows == expected_owner_activities(history.distinct(), plan.requests)
        expected = expected_state(history.truth)
        hubs = {str(r.key["hub_id"]): row_cells(r) for r in d.rows("activity_hub")}
        assert compare_rows("activity_hub", expected.hub_rows, hubs) == []
        assert compare_documents(expected.documents, d.documents("activities")) == []


def test_a_created_event_naming_its_owner_writes_the_owner_row() -> None:
    payload = {"org_id": "o1", "source": "gmail", "external_id": "m1", "subject": "s", "body_preview": "",
               "participants": ["a@x.example"], "sent_at": 5, "owner_id": "lead-1"}  # fmt: skip
    ref = ActivityRef("o1", "gmail", "m1")
    out = list(ActivitiesAgent().handle(Event("e1", ref.ordering_key, 9, 7, "email.created", payload)))
    assert out[1] == Upsert("owner_activity", {"org_id": "o1", "owner_id": "lead-1", "hub_id": ref.hub_id},
                            {"kind": "email", "created_at": 7}, 9)  # fmt: skip
