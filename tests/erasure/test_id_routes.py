"""Erasure reaches ID mutation's records (``converge_id_routes``): a request learnt after the
erasure routes nothing of the erased subject back, and ``erase verify`` sees the records.

Through the test driver (SQLite in memory) with the ID-mutation stream app and personal data
declared on its owner table: a row declaration (the row goes) and a cell one (``body`` goes, the
row stays). Before: the records kept the subject's cells, verify could not see them (values are
stored behind a kind letter), and the late request wrote them under the new final id.
"""

from __future__ import annotations

import pytest

from framework import App, PersonalData, Upsert
from framework.core.mutations import Mutation
from framework.erasure.declare import Subject
from framework.erasure.run import erase
from framework.erasure.verify import verify
from framework.idmutation import IdRequest
from framework.idmutation.routes import ROUTES_TABLE, mutation_records
from framework.testing import Driver
from tests.idmutation.stream_app import NoteAgent, OwnerAgent, activity, linked, note
from tests.idmutation.stream_app import app as stream_app

SUBJECT = Subject("email", "Ann@X.io")
DECLARATIONS = {
    "row": PersonalData("email", "owner_activity", columns=("body",), normalize=str.lower),
    "cells": PersonalData("email", "owner_activity", columns=("body",), erase=("body",), normalize=str.lower),
}


def _app(kind: str) -> App:
    return App("owner-erasure", agents=[OwnerAgent(), NoteAgent()], id_mutation=stream_app.id_mutation,
               personal_data=[DECLARATIONS[kind]])  # fmt: skip


def rows(d: Driver) -> dict[tuple[str, str], dict[str, object]]:
    return {(str(r.key["owner_id"]), str(r.key["activity_id"])): r.values() for r in d.rows("owner_activity")}


def _kept(kind: str, cells: dict[str, object]) -> dict[str, object]:
    """What of an activity of the subject stays: nothing for a row declaration, else its kind."""
    return {} if kind == "row" else {k: v for k, v in cells.items() if k != "body"}


def _residue(d: Driver, app: App, key: bytes) -> list[str]:
    """Where verify finds residue: a store table's name, else the place."""
    return [r.where.split()[0] if r.place == "store" else r.place
            for r in d.run(verify(app, SUBJECT, key=key, store=d.store))]  # fmt: skip


@pytest.mark.parametrize("kind", ["row", "cells"])
def test_a_dropped_write_of_an_erased_subject_stays_out_after_a_late_merge(
    kind: str, erasure_key: bytes
) -> None:
    app = _app(kind)
    requests = [IdRequest(26, "r1", "t1", "delete", "5", None)]
    with Driver(app) as d:
        d.id_job(requests)
        d.send([activity("e1", "t1", "5", "x1", 67, body="ann@x.io", kind="call"),
                activity("e2", "t1", "5", "x2", 68, body="other", kind="mail")])  # fmt: skip
        assert rows(d) == {}  # 5 is deleted: both writes are only recorded
        assert _residue(d, app, erasure_key) == [ROUTES_TABLE.name, "denylist"]
        report = d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
        assert report.rows[ROUTES_TABLE.name] == (2 if kind == "row" else 1)
        assert _residue(d, app, erasure_key) == []
        requests.append(IdRequest(62, "r2", "t1", "merge", "5", "2"))
        d.id_job(requests)
        expected = {("2", "x2"): {"body": "other", "kind": "mail"}}
        if kind == "cells":
            expected[("2", "x1")] = {"kind": "call"}
        assert rows(d) == expected
        assert _residue(d, app, erasure_key) == []


@pytest.mark.parametrize("kind", ["row", "cells"])
def test_a_moved_write_of_an_erased_subject_stays_out_after_a_late_convert(
    kind: str, erasure_key: bytes
) -> None:
    app = _app(kind)
    requests = [IdRequest(10, "r1", "t1", "convert", "1", "2")]
    with Driver(app) as d:
        d.send(activity("e0", "t1", "1", "x0", 5, body="ann@x.io", kind="visit"))  # moved by the job
        d.id_job(requests)
        d.send(activity("e1", "t1", "1", "x1", 67, body="ANN@x.io", kind="call"))  # moved by the stream
        assert set(rows(d)) == {("2", "x0"), ("2", "x1")}
        d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
        assert _residue(d, app, erasure_key) == []
        requests.append(IdRequest(50, "r2", "t1", "convert", "1", "5"))
        d.id_job(requests)
        expected = {}
        if kind == "cells":  # @5 stays with 2 (1's before the first convert), @67 follows 1 to 5
            expected = {("2", "x0"): {"kind": "visit"}, ("5", "x1"): {"kind": "call"}}
        assert rows(d) == expected
        assert _residue(d, app, erasure_key) == []


@pytest.mark.parametrize("kind", ["row", "cells"])
def test_writes_after_the_erasure_leave_no_record_to_route(kind: str, erasure_key: bytes) -> None:
    """The stream's screen drops the records with the writes it withholds: a write of the subject
    under a deleted id (the plain agent) and a joined one (the join agent) leave nothing that a
    merge learnt later could route back."""
    app = _app(kind)
    requests = [IdRequest(26, "r1", "t1", "delete", "5", None)]
    with Driver(app) as d:
        d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
        d.id_job(requests)
        d.send(linked("l1", "t1", "5", "th1", 30))
        d.send([activity("e1", "t1", "5", "x1", 67, body="ann@x.io", kind="call"),
                note("n1", "th1", "x3", "Ann@X.io", 69)])  # fmt: skip
        assert d.parked == [] and rows(d) == {}
        recorded = d.rows(ROUTES_TABLE.name)
        assert recorded if kind == "cells" else not recorded  # the kind cell is still recorded
        requests.append(IdRequest(62, "r2", "t1", "merge", "5", "2"))
        d.id_job(requests)
        assert rows(d) == ({} if kind == "row" else {("2", "x1"): {"kind": "call"}})
        assert _residue(d, app, erasure_key) == []


def stale_records(tenant: str, origin: str, act: str, version: int, **cells: str) -> list[Mutation]:
    """The records a worker whose deny-list is not reloaded yet writes for a write under ``origin``
    that it dropped (its owner deleted): what the erasure never saw."""
    owner = stream_app.id_mutation.column("owner_activity")  # type: ignore[union-attr]
    key = {"tenant": tenant, "owner_id": origin, "activity_id": act}
    return list(mutation_records(owner, origin, Upsert("owner_activity", key, cells, version), None))


@pytest.mark.parametrize("kind", ["row", "cells"])
def test_records_written_after_the_erasure_are_not_routed_by_a_late_request(
    kind: str, erasure_key: bytes
) -> None:
    """Re-routing screens against the deny-list: records of the subject written after the erasure
    (a worker's stale screen) are deleted, not routed, when a late merge re-routes their id."""
    app = _app(kind)
    requests = [IdRequest(26, "r1", "t1", "delete", "5", None)]
    with Driver(app) as d:
        d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
        d.id_job(requests)
        d.run(d.store.apply(stale_records("t1", "5", "x1", 67, body="ann@x.io", kind="call")))
        assert _residue(d, app, erasure_key) == [ROUTES_TABLE.name]
        requests.append(IdRequest(62, "r2", "t1", "merge", "5", "2"))
        d.id_job(requests)
        assert rows(d) == ({} if kind == "row" else {("2", "x1"): {"kind": "call"}})
        assert _residue(d, app, erasure_key) == []
