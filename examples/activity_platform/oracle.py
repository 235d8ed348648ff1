"""The state a history must converge to, derived from its ground truth alone.

``expected_state(truth)`` computes, without the agents or a store:

- the live cells of every hub row, each with its expected write time. A
  cell is live when the latest write of its field has a version greater than
  the activity's latest cancellation (a cancellation shadows every cell
  written at or below its version, augmented cells included) and a value.
  ``kind`` was written by every record write, the identity cells by every
  record and insight write;
- every engagement log row, and the current engagement state per hub row
  (the last engagement in occurrence order) with the log's version;
- the index documents: one per hub row with a live cell, built from those
  cells as the projection does, versioned by the highest version of any
  write to the hub row or its log (record, insight, cancellation, engagement):
  the projection's version mark.

``expected_owner_activities(events, requests)`` gives the ``owner_activity``
rows: one per created event that names a CRM owner, under the id the owner
ends at after the ID mutation requests (``examples.id_requests.final_id``; a
deleted owner has no rows), the newest write of each cell winning.

``expected_totals(truth, events, requests, erased)`` gives the totals of the app's aggregates
(``aggregates.py``) by plain loops: per aggregate name, ``{group id: measures}``. From the
hub rows above, ``engagement_daily``: each activity whose row holds a live ``kind`` and
``starts_at`` counts once in its organisation, kind and UTC day of ``starts_at``, an email with
an ``opened`` (``replied``) engagement once in ``opened`` (``replied``); from the
``owner_activity`` rows above, ``owner_daily``: each row counts once in ``emails`` or
``meetings`` of its owner on the UTC day of ``created_at``. After the erasure of the addresses
``erased`` (``personal.py``), an activity whose live ``participants`` or ``shared_with`` hold
one of them is gone, and an engagement by one of them does not count.

The ``compare_*`` functions are pure: they take plain mappings (convert store
reads with ``row_cells`` / ``hit_document``) and return every divergence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.identity import hub_id
from examples.activity_platform.truth import ActivityTruth, Truth
from examples.id_requests import final_id
from framework.core.aggregate import group_id
from framework.core.events import Event
from framework.idmutation import IdRequest
from framework.testing.compare import (
    CellState,
    Divergence,
    compare_documents,
    compare_rows,
    hit_document,
    row_cells,
)

__all__ = [
    "expected_owner_activities",
    "expected_totals",
    "Totals",
    "CellState",
    "Expected",
    "Divergence",
    "expected_state",
    "compare_rows",
    "compare_engagement",
    "compare_documents",
    "row_cells",
    "hit_document",
]

_LISTS = ("participants", "shared_with")
_DAY_MICROS = 86_400_000_000

#: Aggregate name -> group id -> measures.
Totals = dict[str, dict[str, dict[str, float]]]


@dataclass(frozen=True)
class Expected:
    """The converged state of a history."""

    #: hub_id -> live cells; rows without a live cell are absent.
    hub_rows: dict[str, dict[str, CellState]]
    #: (hub_id, at, event_id) -> cells of the engagement log row.
    engagement_logs: dict[tuple[str, int, str], dict[str, CellState]]
    #: hub_id -> (current engagement state, highest log write time).
    engagement: dict[str, tuple[str, int]]
    #: doc_id -> (whole document, external version).
    documents: dict[str, tuple[dict[str, Any], int]]


def _addresses(value: Any) -> str | None:
    people = sorted({a.lower() for a in value})
    return ",".join(people) if people else None


def _hub_cells(t: ActivityTruth) -> dict[str, CellState]:
    cells: dict[str, CellState] = {}
    dead_at = -1 if t.cancelled_at is None else t.cancelled_at

    def put(column: str, value: Any, version: int) -> None:
        if column in _LISTS:
            value = _addresses(value)
        if value is not None and version > dead_at:
            cells[column] = (value, version)

    if t.record_versions:
        put("kind", t.kind, max(t.record_versions))
    writes = t.record_versions + t.insight_versions
    if writes:
        for column, value in (("org_id", t.org_id), ("source", t.source), ("external_id", t.external_id)):
            put(column, value, max(writes))
    for column, (value, version) in (t.record | t.insights).items():
        put(column, value, version)
    return cells


def _document(
    hub: str, cells: Mapping[str, CellState], engagement: tuple[str, int] | None, version: int
) -> tuple[dict, int]:
    doc: dict[str, Any] = {"hub_id": hub}
    for column, (value, _) in cells.items():
        doc[column] = str(value).split(",") if column in _LISTS else value
    doc["has_record"] = "kind" in cells
    if engagement is not None:
        doc["engagement_state"] = engagement[0]
    return doc, version


def _mark(t: ActivityTruth) -> int:
    """The highest version written to a hub row or its log: the document's version."""
    writes = [*t.record_versions, *t.insight_versions, *(g.version for g in t.engagement)]
    if t.cancelled_at is not None:
        writes.append(t.cancelled_at)
    return max(writes)


def expected_state(truth: Truth) -> Expected:
    """The converged state of the history whose ground truth is ``truth``."""
    rows: dict[str, dict[str, CellState]] = {}
    logs: dict[tuple[str, int, str], dict[str, CellState]] = {}
    engagement: dict[str, tuple[str, int]] = {}
    docs: dict[str, tuple[dict[str, Any], int]] = {}
    for hub, t in sorted(truth.activities.items()):
        for g in t.engagement:
            logs[(hub, g.fact.at, g.event_id)] = {
                "state": (g.fact.state, g.version),
                "actor": (g.fact.actor.lower(), g.version),
            }
        if t.engagement:
            last = max(t.engagement, key=lambda g: g.fact.seq)
            engagement[hub] = (last.fact.state, max(g.version for g in t.engagement))
        cells = _hub_cells(t)
        if cells:
            rows[hub] = cells
            docs[hub] = _document(hub, cells, engagement.get(hub), _mark(t))
    return Expected(rows, logs, engagement, docs)


def compare_engagement(
    expected: Mapping[str, tuple[str, int]], actual: Mapping[str, tuple[str, int]]
) -> list[Divergence]:
    """Differences in current engagement state and log version per hub row."""
    keys = sorted(set(expected) | set(actual))
    return [
        Divergence("engagement", k, None, expected.get(k), actual.get(k))
        for k in keys
        if expected.get(k) != actual.get(k)
    ]


def expected_owner_activities(
    events: Iterable[Event], requests: Iterable[IdRequest] = ()
) -> dict[tuple[str, str, str], dict[str, CellState]]:
    """``(org_id, owner_id, hub_id) -> cells`` of ``owner_activity`` (see the module docstring)."""
    requests = list(requests)
    out: dict[tuple[str, str, str], dict[str, CellState]] = {}
    for e in events:
        p = e.payload
        if not e.type.endswith(".created") or "owner_id" not in p:
            continue
        final = final_id(requests, p["org_id"], p["owner_id"])
        if final is None:
            continue
        row = out.setdefault((p["org_id"], final, hub_id(p["org_id"], p["source"], p["external_id"])), {})
        for name, value in (("kind", e.type.partition(".")[0]), ("created_at", e.occurred_at)):
            if name not in row or row[name][1] < e.version:
                row[name] = (value, e.version)
    return out


def _day(micros: int) -> int:
    """The start (epoch seconds) of the UTC day holding a time in microseconds."""
    return micros // _DAY_MICROS * 86_400


def expected_totals(
    truth: Truth, events: Iterable[Event], requests: Iterable[IdRequest] = (), erased: Iterable[str] = ()
) -> Totals:
    """The totals of every aggregate of the app (see the module docstring); ``events`` are the
    history's events (for the owners they name), ``requests`` the ID mutation requests applied,
    ``erased`` the addresses erased after the history."""
    gone = {a.lower() for a in erased}
    engagement: dict[str, dict[str, float]] = {}
    for t in truth.activities.values():
        cells = _hub_cells(t)
        people = {a for c in _LISTS if c in cells for a in str(cells[c][0]).split(",")}
        if "kind" not in cells or "starts_at" not in cells or people & gone:
            continue
        kind = cells["kind"][0]
        gid = group_id([t.org_id, kind], _day(cells["starts_at"][0]))
        g = engagement.setdefault(gid, {"activities": 0, "opened": 0, "replied": 0})
        g["activities"] += 1
        if kind == "email":
            states = {e.fact.state for e in t.engagement if e.fact.actor.lower() not in gone}
            g["opened"] += "opened" in states
            g["replied"] += "replied" in states
    owners: dict[str, dict[str, float]] = {}
    for (org, owner, _), row in expected_owner_activities(events, requests).items():
        gid = group_id([org, owner], _day(row["created_at"][0]))
        g = owners.setdefault(gid, {"emails": 0, "meetings": 0})
        g["emails" if row["kind"][0] == "email" else "meetings"] += 1
    return {"engagement_daily": engagement, "owner_daily": owners}
