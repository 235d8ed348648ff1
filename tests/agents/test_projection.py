"""The index projection of a merged hub row and its engagement."""

from __future__ import annotations

from typing import Any

import pytest

from agents.engagement import Engagement, current_engagement
from agents.projection import INDEX_MAPPINGS, project
from agents.schemas import ACTIVITY_HUB
from framework.core.cells import Cell
from framework.core.rows import Row


def _row(**cells: tuple[Any, int]) -> Row:
    return Row({"hub_id": "h1"}, {k: Cell(v, w) for k, (v, w) in cells.items()})


def _log(*entries: tuple[int, str, str, int]) -> list[Row]:
    return [
        Row({"hub_id": "h1", "at": at, "event_id": eid}, {"state": Cell(s, v)}) for at, eid, s, v in entries
    ]


def test_whole_document_from_live_cells_versioned_by_newest_cell() -> None:
    row = _row(kind=("meeting", 5), subject=("Renewal", 5), participants=("a@x,b@x", 7), score=(0.5, 9))
    doc_id, doc, version = project(row)
    assert doc_id == "h1"
    assert doc == {
        "hub_id": "h1",
        "kind": "meeting",
        "subject": "Renewal",
        "participants": ["a@x", "b@x"],
        "score": 0.5,
        "has_record": True,
    }
    assert version == 9


def test_insight_only_row_is_indexed_without_record() -> None:
    _, doc, version = project(_row(org_id=("o", 3), sentiment=("positive", 3), shared_with=("c@x", 4)))
    assert doc["has_record"] is False and doc["shared_with"] == ["c@x"] and version == 4


def test_engagement_state_and_version_join_the_document() -> None:
    row = _row(kind=("email", 10))
    _, doc, version = project(row, Engagement("opened", 50))
    assert doc["engagement_state"] == "opened" and version == 50
    _, _, version = project(row, Engagement("opened", 3))
    assert version == 10


def test_row_without_live_cells_has_no_document() -> None:
    with pytest.raises(ValueError):
        project(Row({"hub_id": "h1"}, {}))


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
