"""The activity projection: a document from the merged hub row and its engagement, at the version mark."""

from __future__ import annotations

from typing import Any

from agents import ActivityProjection
from agents.engagement import Engagement, current_engagement
from agents.projection import INDEX_MAPPINGS
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from framework.core.cells import Cell
from framework.core.rows import Row
from framework.testing import Driver
from tests.agents.builders import HUB, MEETING, event
from tests.agents.replay import app

P = ActivityProjection()
KEY = {"hub_id": "h1"}


def _row(**cells: tuple[Any, int]) -> Row:
    return Row(KEY, {k: Cell(v, w) for k, (v, w) in cells.items()})


def _log(*entries: tuple[int, str, str, int]) -> list[Row]:
    return [Row({**KEY, "at": at, "event_id": eid}, {"state": Cell(s, v)}) for at, eid, s, v in entries]


def _rows(hub: list[Row], log: list[Row] | None = None) -> dict[str, list[Row]]:
    return {ACTIVITY_HUB.name: hub, ENGAGEMENT_LOG.name: log or []}


def _mark(version: int) -> Row:
    return Row(KEY, {"version": Cell(version, version)})


def test_whole_document_from_live_cells() -> None:
    row = _row(kind=("meeting", 5), subject=("Renewal", 5), participants=("a@x,b@x", 7), score=(0.5, 9))
    assert P.build(KEY, _rows([row])) == {
        "hub_id": "h1",
        "kind": "meeting",
        "subject": "Renewal",
        "participants": ["a@x", "b@x"],
        "score": 0.5,
        "has_record": True,
    }
    assert P.document_id(KEY) == "h1"


def test_the_version_is_the_mark_else_the_newest_live_cell() -> None:
    rows = _rows([_row(kind=("meeting", 5), score=(0.5, 9))])
    assert P.document(KEY, rows, None)[2] == 9
    assert P.document(KEY, rows, _mark(40))[2] == 40  # e.g. a cancellation at 40 of other cells
    assert P.version_table.name == "activities_version"


def test_insight_only_row_is_indexed_without_record() -> None:
    doc = P.build(KEY, _rows([_row(org_id=("o", 3), sentiment=("positive", 3), shared_with=("c@x", 4))]))
    assert doc is not None and doc["has_record"] is False and doc["shared_with"] == ["c@x"]


def test_engagement_state_joins_the_document() -> None:
    rows = _rows([_row(kind=("email", 10))], _log((50, "e1", "opened", 50)))
    doc_id, doc, version = P.document(KEY, rows, None)
    assert doc is not None and doc["engagement_state"] == "opened" and version == 50


def test_row_without_live_cells_has_no_document() -> None:
    assert P.build(KEY, _rows([])) is None
    assert P.document(KEY, _rows([], _log((5, "e", "sent", 5))), _mark(30)) == ("h1", None, 30)


def test_mapping_covers_every_document_field() -> None:
    fields = set(INDEX_MAPPINGS["properties"])
    assert {c.name for c in ACTIVITY_HUB.all_columns} | {"engagement_state", "has_record"} == fields


def test_current_engagement_latest_at_then_precedence_then_event_id() -> None:
    assert current_engagement([]) is None
    log = _log((10, "e1", "sent", 11), (20, "e3", "clicked", 21), (20, "e2", "opened", 99))
    assert current_engagement(log) == Engagement("clicked", 99)
    log = _log((10, "e1", "replied", 11), (30, "e2", "opened", 31))
    assert current_engagement(log) == Engagement("opened", 31)  # a later re-open is the current state
    log = _log((5, "b", "opened", 6), (5, "a", "opened", 7))
    assert current_engagement(reversed(log)) == current_engagement(log) == Engagement("opened", 7)


def test_the_index_follows_cancellation_and_late_writes_through_the_worker_steps() -> None:
    """Through the kit's Driver: the delete goes to the index at the mark, so older writes stay out."""
    with Driver(app) as d:
        d.send(event("meeting.created", event_id="c", version=10, **MEETING))
        assert d.documents("activities")[HUB][1] == 10
        d.send(event("meeting.cancelled", event_id="x", version=30))
        assert d.documents("activities") == {}
        d.send(event("insight.computed", event_id="i1", version=20, topic="late"))  # older than the cancel
        d.send(event("meeting.created", event_id="c", version=10, **MEETING))  # a replay
        assert d.documents("activities") == {} and d.rows(ACTIVITY_HUB.name) == []
        d.send(event("engagement.opened", event_id="o", version=35, occurred_at=33, actor="a@x.example"))
        assert d.documents("activities") == {}  # a log alone makes no document
        d.send(event("insight.computed", event_id="i2", version=40, topic="renewal"))
        [(doc, version)] = d.documents("activities").values()
        assert version == 40 and doc["topic"] == "renewal" and doc["has_record"] is False
        assert doc["engagement_state"] == "opened" and d.parked == []
