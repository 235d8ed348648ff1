"""The oracle's rules on hand-built ground truth, and its pure comparison helpers."""

from __future__ import annotations

from examples.activity_platform.oracle import (
    CellState,
    Divergence,
    compare_documents,
    compare_engagement,
    compare_rows,
    expected_state,
    hit_document,
    row_cells,
)
from examples.activity_platform.truth import (
    ActivityTruth,
    EngagementFact,
    InsightWrite,
    RecordCancel,
    RecordWrite,
    Truth,
)
from framework.core.cells import Cell
from framework.core.rows import Row
from stores.base import SearchHit

CREATED = {"subject": "S", "body_preview": "", "participants": ("B@x", "a@x", "b@x"), "status": "scheduled"}


def _truth(*changes: tuple[int, object], kind: str = "meeting") -> Truth:
    t = ActivityTruth("h1", "o1", "gcal", "x1", kind)
    for i, (version, effect) in enumerate(changes):
        t.apply(effect, version, f"e{i}")  # type: ignore[arg-type]
    return Truth({"h1": t})


def test_live_record_with_insights_before_it() -> None:
    truth = _truth(
        (5, InsightWrite({"sentiment": "positive", "next_step": None})), (10, RecordWrite(CREATED))
    )
    exp = expected_state(truth)
    assert exp.hub_rows["h1"] == {
        "kind": ("meeting", 10),
        "org_id": ("o1", 10),
        "source": ("gcal", 10),
        "external_id": ("x1", 10),
        "subject": ("S", 10),
        "body_preview": ("", 10),
        "participants": ("a@x,b@x", 10),
        "status": ("scheduled", 10),
        "sentiment": ("positive", 5),
    }
    doc, version = exp.documents["h1"]
    assert doc["participants"] == ["a@x", "b@x"] and doc["has_record"] is True and version == 10


def test_cancellation_shadows_older_and_equal_writes_only() -> None:
    truth = _truth(
        (10, RecordWrite(CREATED)),
        (12, InsightWrite({"topic": "pricing"})),
        (20, RecordCancel()),
        (20, InsightWrite({"score": 0.5})),  # tie with the tombstone: shadowed
        (25, InsightWrite({"sentiment": "mixed"})),
    )
    exp = expected_state(truth)
    assert exp.hub_rows["h1"] == {
        "org_id": ("o1", 25),
        "source": ("gcal", 25),
        "external_id": ("x1", 25),
        "sentiment": ("mixed", 25),
    }
    doc, version = exp.documents["h1"]
    assert doc["has_record"] is False and version == 25


def test_cancelled_without_later_writes_has_no_row_and_recreation_comes_back() -> None:
    gone = expected_state(
        _truth((10, RecordWrite(CREATED)), (11, InsightWrite({"topic": "t"})), (20, RecordCancel()))
    )
    assert gone.hub_rows == {} and gone.documents == {}
    back = expected_state(
        _truth(
            (10, RecordWrite(CREATED)), (20, RecordCancel()), (30, RecordWrite({**CREATED, "subject": "T"}))
        )
    )
    assert back.hub_rows["h1"]["subject"] == ("T", 30) and back.hub_rows["h1"]["kind"] == ("meeting", 30)


def test_engagement_is_the_last_occurrence_and_the_log_version_is_the_max() -> None:
    truth = _truth(
        (10, RecordWrite(CREATED)),
        (52, EngagementFact("clicked", 50, "A@x", 2)),
        (51, EngagementFact("opened", 50, "a@x", 1)),
        (40, EngagementFact("sent", 40, "s@x", 0)),
        kind="email",
    )
    exp = expected_state(truth)
    assert exp.engagement == {"h1": ("clicked", 52)}
    assert exp.engagement_logs[("h1", 50, "e1")] == {"state": ("clicked", 52), "actor": ("a@x", 52)}
    doc, version = exp.documents["h1"]
    assert doc["engagement_state"] == "clicked" and version == 52


def test_compare_rows_reports_each_kind_of_difference() -> None:
    expected: dict[str, dict[str, CellState]] = {"a": {"x": (1, 5), "y": ("v", 5)}, "b": {"x": (2, 5)}}
    actual: dict[str, dict[str, CellState]] = {"a": {"x": (1, 6), "z": ("w", 5)}, "c": {"x": (3, 5)}}
    found = compare_rows("t", expected, actual)
    assert {(d.key, d.field) for d in found} == {("a", "x"), ("a", "y"), ("a", "z"), ("b", None), ("c", None)}
    assert {(d.key, d.field) for d in compare_rows("t", expected, actual, writetimes=False)} == {
        ("a", "y"),
        ("a", "z"),
        ("b", None),
        ("c", None),
    }
    assert compare_rows("t", expected, expected) == []


def test_compare_documents_and_engagement() -> None:
    expected = {"d": ({"a": 1, "b": [1]}, 5)}
    assert compare_documents(expected, {"d": ({"a": 1, "b": [1]}, 5)}) == []
    assert compare_documents(expected, {"d": ({"a": 2, "b": [1]}, 6)}) == [
        Divergence("index", "d", "a", 1, 2),
        Divergence("index", "d", "_version", 5, 6),
    ]
    assert compare_documents(expected, {"d": ({"a": 1, "b": [1]}, 6)}, versions=False) == []
    assert [d.key for d in compare_documents(expected, {"e": ({}, 1)})] == ["d", "e"]
    assert compare_engagement({"h": ("opened", 3)}, {"h": ("sent", 3)})[0].field is None
    assert "expected" in str(compare_engagement({"h": ("opened", 3)}, {})[0])


def test_converters_from_store_contracts() -> None:
    assert row_cells(Row({"hub_id": "h"}, {"x": Cell(1, 7)})) == {"x": (1, 7)}
    assert hit_document(SearchHit("h", 9, {"a": 1})) == ({"a": 1}, 9)
