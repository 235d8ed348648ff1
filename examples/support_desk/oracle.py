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

The ``compare_*`` functions are pure and return every divergence.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from examples.support_desk.truth import StatusChange, TicketTruth, Truth
from framework import Row

__all__ = [
    "CellState",
    "Expected",
    "Divergence",
    "expected_state",
    "compare_rows",
    "compare_documents",
    "row_cells",
]

#: A cell as compared: its value and its write time.
CellState: TypeAlias = tuple[Any, int]
K = TypeVar("K", bound=Hashable)
_PII = ("requester_email", "requester_name")


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


@dataclass(frozen=True)
class Divergence:
    """One difference; ``field`` None means the whole row or document."""

    table: str
    key: Hashable
    field: str | None
    expected: Any
    actual: Any

    def __str__(self) -> str:
        where = f"{self.table}[{self.key!r}]" + (f".{self.field}" if self.field else "")
        return f"{where}: expected {self.expected!r}, got {self.actual!r}"


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


def compare_rows(
    table: str, expected: Mapping[K, Mapping[str, CellState]], actual: Mapping[K, Mapping[str, CellState]]
) -> list[Divergence]:
    """Differences between expected and actual rows (key -> column -> (value, write time))."""
    out: list[Divergence] = []
    for key in sorted(set(expected) | set(actual), key=repr):
        exp, act = expected.get(key), actual.get(key)
        if exp is None or act is None:
            out.append(Divergence(table, key, None, exp, act))
            continue
        out += [
            Divergence(table, key, c, exp.get(c), act.get(c))
            for c in sorted(set(exp) | set(act))
            if exp.get(c) != act.get(c)
        ]
    return out


def compare_documents(
    expected: Mapping[str, tuple[Mapping[str, Any], int]],
    actual: Mapping[str, tuple[Mapping[str, Any], int | None]],
) -> list[Divergence]:
    """Differences between expected and actual documents (doc_id -> (source, version))."""
    out: list[Divergence] = []
    for doc_id in sorted(set(expected) | set(actual)):
        exp, act = expected.get(doc_id), actual.get(doc_id)
        if exp is None or act is None:
            out.append(Divergence("index", doc_id, None, exp, act))
            continue
        out += [
            Divergence("index", doc_id, f, exp[0].get(f), act[0].get(f))
            for f in sorted(set(exp[0]) | set(act[0]))
            if exp[0].get(f) != act[0].get(f)
        ]
        if exp[1] != act[1]:
            out.append(Divergence("index", doc_id, "_version", exp[1], act[1]))
    return out


def row_cells(row: Row) -> dict[str, CellState]:
    """A store row as compared: column -> (value, write time) of its live cells."""
    return {name: (cell.value, cell.writetime) for name, cell in row.cells.items() if cell.value is not None}
