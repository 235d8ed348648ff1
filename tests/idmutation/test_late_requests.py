"""A request learnt after the job ran re-routes what earlier maps already moved or dropped (issue
22, case 5), through the test driver (SQLite in memory): (A) a write dropped because its owner was
deleted comes back when a merge of that owner is learnt later; (B) a write moved by a first
convert moves again when a second convert of the same id is learnt. Each is checked with the write
arriving before the first job (the job moves it) and after it (the stream resolves it)."""

from __future__ import annotations

import pytest

from agents.identity import ActivityRef
from examples.activity_platform.app import app as activity_app
from examples.support_desk.app import app as desk_app
from framework import Event
from framework.idmutation import IdRequest, collapse
from framework.idmutation.apply import apply_id_map, sweep
from framework.testing import Driver
from tests.examples.support_desk.builders import CREATED
from tests.examples.support_desk.builders import event as desk_event
from tests.idmutation.stream_app import activity, app


def rows(d: Driver) -> dict[tuple[str, str, str], dict[str, tuple[object, int]]]:
    return {
        (str(r.key["tenant"]), str(r.key["owner_id"]), str(r.key["activity_id"])): {
            n: (c.value, c.writetime) for n, c in r.cells.items()
        }
        for r in d.rows("owner_activity")
    }


def job(d: Driver, requests: list[IdRequest]) -> None:
    """The job's effect: the map applied to the store and published to the stream."""
    d.id_job(requests)


@pytest.mark.parametrize("write_first", [True, False])
def test_a_write_dropped_for_a_deleted_owner_follows_a_merge_learnt_later(write_first: bool) -> None:
    late = activity("e1", "t1", "5", "x1", 67, body="late")
    requests = [IdRequest(26, "r1", "t1", "delete", "5", None)]
    with Driver(app) as d:
        if write_first:
            assert d.send(late) == []
        job(d, requests)
        if not write_first:
            assert d.send(late) == []
        assert rows(d) == {}  # 5 is deleted: the write is gone from the owner tables
        requests.append(IdRequest(62, "r2", "t1", "merge", "5", "2"))
        job(d, requests)
        assert rows(d) == {("t1", "2", "x1"): {"body": ("late", 67)}}


@pytest.mark.parametrize("write_first", [True, False])
def test_a_write_moved_by_a_convert_moves_again_when_a_later_convert_is_learnt(write_first: bool) -> None:
    late = activity("e1", "t1", "1", "x1", 67, body="late")
    early = activity("e2", "t1", "1", "x2", 5, body="early")
    requests = [IdRequest(10, "r1", "t1", "convert", "1", "2")]
    with Driver(app) as d:
        assert d.send(early) == []
        if write_first:
            assert d.send(late) == []
        job(d, requests)
        if not write_first:
            assert d.send(late) == []
        assert rows(d) == {
            ("t1", "2", "x1"): {"body": ("late", 67)},
            ("t1", "2", "x2"): {"body": ("early", 5)},
        }
        requests.append(IdRequest(50, "r2", "t1", "convert", "1", "5"))
        job(d, requests)
        # @67 follows 1's last move (to 5); @5 was 1's before the first convert: it stays with 2
        assert rows(d) == {
            ("t1", "5", "x1"): {"body": ("late", 67)},
            ("t1", "2", "x2"): {"body": ("early", 5)},
        }
        job(d, requests)  # again: nothing changes
        assert rows(d) == {
            ("t1", "5", "x1"): {"body": ("late", 67)},
            ("t1", "2", "x2"): {"body": ("early", 5)},
        }


def test_a_final_that_flips_back_to_a_tombstoned_id_is_reported() -> None:
    """1->2, then 1->5, then 1->2 again, each learnt after a job: the cell left 2 by a tombstone at
    its own version, so it cannot come back there; the apply counts it as unconverged."""
    requests = [IdRequest(10, "r1", "t1", "convert", "1", "2")]
    with Driver(app) as d:
        d.send(activity("e1", "t1", "1", "x1", 67, body="late"))
        job(d, requests)
        requests.append(IdRequest(50, "r2", "t1", "convert", "1", "5"))
        job(d, requests)
        requests.append(IdRequest(60, "r3", "t1", "convert", "1", "2"))
        report = d.run(apply_id_map(d.store, app.id_mutation, collapse(requests)))  # type: ignore[arg-type]
        assert report.unconverged == 1 and report.to_dict()["unconverged"] == 1
        assert rows(d) == {}


def test_the_sweep_routes_again_what_a_worker_resolved_with_an_older_map() -> None:
    """The worker still has the map of 1->2 when 1->5 was already applied: it writes the late
    event under 2; the notification of its record names origin 1, and the sweep moves it to 5."""
    first = [IdRequest(10, "r1", "t1", "convert", "1", "2")]
    both = [*first, IdRequest(50, "r2", "t1", "convert", "1", "5")]
    with Driver(app) as d:
        job(d, first)
        d.run(apply_id_map(d.store, app.id_mutation, collapse(both)))  # type: ignore[arg-type]
        assert d.send(activity("e1", "t1", "1", "x1", 67, body="late")) == []
        assert rows(d) == {("t1", "2", "x1"): {"body": ("late", 67)}}

        async def lookup(pairs: object) -> dict:
            return {p: iv for p, iv in collapse(both).items() if p in pairs}  # type: ignore[operator]

        keys = [("converge_id_routes", {"tenant": "t1", "origin": "1"}), ("other", {"tenant": "t1"})]
        report = d.run(sweep(d.store, app.id_mutation, lookup, keys))  # type: ignore[arg-type]
        assert report.rerouted == 1 and rows(d) == {("t1", "5", "x1"): {"body": ("late", 67)}}


def _activity_event(owner: str, version: int) -> Event:
    payload = {"org_id": "o1", "source": "gmail", "external_id": "m1", "subject": "s", "body_preview": "",
               "participants": ["a@x.example"], "sent_at": 5, "owner_id": owner}  # fmt: skip
    return Event(
        f"e{version}", ActivityRef("o1", "gmail", "m1").ordering_key, version, 7, "email.created", payload
    )


def _desk_event(owner: str, version: int) -> Event:
    return desk_event("ticket.created", version=version, occurred_at=5, requester_id=owner, **CREATED)


#: (app, event of an owner at a version, owner table, (tenant column, owner column), tenant)
EXAMPLES = {
    "activity platform": (activity_app, _activity_event, "owner_activity", ("org_id", "owner_id"), "o1"),
    "support desk": (desk_app, _desk_event, "requester_ticket", ("tenant", "requester_id"), "acme"),
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
@pytest.mark.parametrize("write_first", [True, False])
def test_both_example_apps_follow_requests_learnt_late(example: str, write_first: bool) -> None:
    """Cases (A) and (B) with the example apps' own agents and owner tables."""
    the_app, make, table, (tenant_col, owner_col), tenant = EXAMPLES[example]

    def owners(d: Driver) -> list[tuple[str, int]]:
        return sorted(
            (str(r.key[owner_col]), r.version) for r in d.rows(table) if r.key[tenant_col] == tenant
        )

    for first, later, expected in (
        (IdRequest(26, "r1", tenant, "delete", "lead-5", None), IdRequest(62, "r2", tenant, "merge", "lead-5",
                                                                          "contact-2"), "contact-2"),
        (IdRequest(10, "r1", tenant, "convert", "lead-5", "contact-2"),
         IdRequest(50, "r2", tenant, "convert", "lead-5", "contact-9"), "contact-9"),
    ):  # fmt: skip
        with Driver(the_app) as d:
            if write_first:
                assert d.send(make("lead-5", 67)) == []
            d.id_job([first])
            if not write_first:
                assert d.send(make("lead-5", 67)) == []
            assert all(owner != "lead-5" for owner, _ in owners(d))
            d.id_job([first, later])
            assert owners(d) == [(expected, 67)]
