"""A request learnt after the job ran re-routes what earlier maps already moved or dropped (issue
22, case 5), through the test driver (SQLite in memory): (A) a write dropped because its owner was
deleted comes back when a merge of that owner is learnt later; (B) a write moved by a first
convert moves again when a second convert of the same id is learnt. Each is checked with the write
arriving before the first job (the job moves it) and after it (the stream resolves it)."""

from __future__ import annotations

import pytest

from framework.idmutation import IdRequest, collapse
from framework.idmutation.apply import apply_id_map, sweep
from framework.testing import Driver
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
