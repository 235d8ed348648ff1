"""The state a support-desk history must converge to, from its ground truth alone.

``expected_state(truth)`` computes, without the agents, the framework's
mapping or a store:

- the live cells of each ticket row with their write times: a field's latest
  write, when it holds a value (a cleared assignee, SLA or sentiment is
  absent) and, for the requester's personal fields, when it is newer than the
  latest erasure (an erasure shadows every write at or below its version,
  whenever it arrives); e-mail addresses in lower case; ``created_at`` from
  the created event; the identity cells at the newest write of the row;
- every status log row and comment row;
- the current status: the last change in source order (latest ``at``; the
  generator orders changes of one instant as the precedence does);
- one document per ticket whose row has a live cell, versioned by the newest
  event about the ticket, erasures included (the framework's version mark).

``expected_requester_tickets(events, requests)`` gives the ``requester_ticket``
rows: one per created event that names a requester, under the id it ends at
after the CRM's ID mutation requests (``examples.id_requests.final_id``; a
deleted id has no rows), the newest write of each cell winning.

``expected_totals(truth)`` gives the totals of the app's aggregates (``aggregates.py``) by
plain loops over the tickets whose record exists (a ``created_at`` cell): per aggregate name,
``{group id: measures}``. ``open_tickets``: a ticket whose current status is open, pending or
reopened counts once in its tenant, status and assignee (None when its assignee cell is not
live), ``next_due`` the least SLA due time (whole seconds) of the group's tickets that have one;
``first_response``: a ticket with a comment by an agent at or after its creation counts once in
its tenant and the UTC day of its first such comment, with the whole seconds from creation to it.

The ``compare_*`` functions are pure and return every divergence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from examples.id_requests import final_id
from examples.support_desk.identity import ticket_id
from examples.support_desk.truth import StatusChange, TicketTruth, Truth
from framework import Event
from framework.core.aggregate import group_id
from framework.idmutation import IdRequest
from framework.testing.compare import (
    CellState,
    Divergence,
    compare_documents,
    compare_rows,
    row_cells,
)

__all__ = [
    "expected_requester_tickets",
    "expected_totals",
    "Totals",
    "CellState",
    "Expected",
    "Divergence",
    "expected_state",
    "compare_rows",
    "compare_documents",
    "row_cells",
]

_PII = ("requester_email", "requester_name")
_SECOND = 1_000_000
_DAY = 86_400

#: Aggregate name -> group id -> measures.
Totals = dict[str, dict[str, dict[str, float]]]


@dataclass(frozen=True)
class Expected:
    """The converged state of a history."""

    #: ticket_id -> live cells; tickets without a live cell are absent.
    tickets: dict[str, dict[str, CellState]]
    #: (ticket_id, at, event_id) -> cells of the status log row.
    status_log: dict[tuple[str, int, str], dict[str, CellState]]
    #: (ticket_id, at, comment_id) -> cells of the comment row.
    comments: dict[tuple[str, int, str], dict[str, CellState]]
    #: ticket_id -> current status, for every ticket with a status change.
    status: dict[str, str]
    #: doc_id -> (document, version).
    documents: dict[str, tuple[dict[str, Any], int]]


def _ticket_cells(t: TicketTruth) -> dict[str, CellState]:
    cells: dict[str, CellState] = {}
    if t.row_writes:
        newest = max(t.row_writes)
        cells.update(
            {
                "tenant": (t.tenant, newest),
                "source": (t.source, newest),
                "external_id": (t.external_id, newest),
            }
        )
    for name, (value, version) in (t.record | t.augmented).items():
        if value is None or (name in _PII and t.erased_at is not None and version <= t.erased_at):
            continue
        cells[name] = (value.lower() if name == "requester_email" else value, version)
    return cells


def _last_status(t: TicketTruth) -> StatusChange:
    return max(t.statuses, key=lambda g: (g.effect.at, g.effect.seq)).effect


def _document(t: TicketTruth, cells: Mapping[str, CellState]) -> tuple[dict[str, Any], int]:
    doc: dict[str, Any] = {"ticket_id": t.ticket_id, **{name: value for name, (value, _) in cells.items()}}
    doc["has_record"] = "created_at" in cells
    if t.statuses:
        last = _last_status(t)
        doc["status"], doc["status_at"] = last.status, last.at
    doc["comment_count"] = len(t.comments)
    if t.comments:
        doc["last_comment_at"] = max(c.effect.at for c in t.comments)
    return doc, max(t.versions)


def expected_state(truth: Truth) -> Expected:
    """The converged state of the history whose ground truth is ``truth``."""
    out = Expected({}, {}, {}, {}, {})
    for t in truth.tickets.values():
        tid = t.ticket_id
        for change in t.statuses:
            s = change.effect
            out.status_log[(tid, s.at, change.event_id)] = {
                "state": (s.status, change.version),
                "changed_by": (s.changed_by, change.version),
            }
        for posted in t.comments:
            c = posted.effect
            out.comments[(tid, c.at, c.comment_id)] = {
                "author_kind": (c.author_kind, posted.version),
                "body": (c.body, posted.version),
            }
        if t.statuses:
            out.status[tid] = _last_status(t).status
        cells = _ticket_cells(t)
        if cells:
            out.tickets[tid] = cells
            out.documents[tid] = _document(t, cells)
    return out


def expected_requester_tickets(
    events: Iterable[Event], requests: Iterable[IdRequest] = ()
) -> dict[tuple[str, str, str], dict[str, CellState]]:
    """``(tenant, requester_id, ticket_id) -> cells`` of ``requester_ticket`` (see the module docstring)."""
    requests = list(requests)
    out: dict[tuple[str, str, str], dict[str, CellState]] = {}
    for e in events:
        p = e.payload
        if e.type != "ticket.created" or "requester_id" not in p:
            continue
        final = final_id(requests, p["tenant"], p["requester_id"])
        if final is None:
            continue
        row = out.setdefault((p["tenant"], final, ticket_id(p["tenant"], p["source"], p["external_id"])), {})
        cells = {"source": p["source"], "external_id": p["external_id"], "created_at": e.occurred_at}
        for name, value in cells.items():
            if name not in row or row[name][1] < e.version:
                row[name] = (value, e.version)
    return out


def expected_totals(truth: Truth) -> Totals:
    """The totals of every aggregate of the app (see the module docstring)."""
    open_tickets: dict[str, dict[str, float]] = {}
    first: dict[str, dict[str, float]] = {}
    for t in truth.tickets.values():
        cells = _ticket_cells(t)
        if "created_at" not in cells:
            continue
        created = cells["created_at"][0]
        status = _last_status(t).status if t.statuses else None
        if status in ("open", "pending", "reopened"):
            assignee = cells["assignee"][0] if "assignee" in cells else None
            g = open_tickets.setdefault(group_id([t.tenant, status, assignee]), {"tickets": 0})
            g["tickets"] += 1
            if "sla_due_at" in cells:
                due = cells["sla_due_at"][0] // _SECOND
                g["next_due"] = min(g.get("next_due", due), due)
        answers = [c.effect.at for c in t.comments if c.effect.author_kind == "agent"]
        answers = [at for at in answers if at >= created]
        if answers:
            at = min(answers)
            seconds = (at - created) // _SECOND
            day = at // _SECOND // _DAY * _DAY
            g = first.setdefault(group_id([t.tenant], day), {"responded": 0, "seconds": 0})
            g["responded"] += 1
            g["seconds"] += seconds
            g["fastest"] = min(g.get("fastest", seconds), seconds)
            g["slowest"] = max(g.get("slowest", seconds), seconds)
    return {"open_tickets": open_tickets, "first_response": first}
