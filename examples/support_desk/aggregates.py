"""The support desk's aggregates (``framework.Aggregate``), one entity a ticket.

- ``OpenTickets`` (``open_tickets``, unwindowed): the tickets not yet solved (current status
  ``open``, ``pending`` or ``reopened``, derived from the status log as the projection does) per
  ``tenant``, ``status`` and ``assignee``: how many (``tickets``) and the earliest SLA due time
  among them (``next_due``, epoch seconds; absent when none of them has one). A status change or
  a new assignee moves the ticket to another group; solving it takes it out. A tenant's open
  queue can hold many tickets, so each group's total is reduced from 8 buckets (``buckets``).
- ``FirstResponse`` (``first_response``): per ``tenant`` and UTC day (a tumbling one-day window)
  of a ticket's first response, the time from its creation (``created_at``) to its first comment
  by an agent (``author_kind`` ``agent``), in whole seconds: how many tickets got their first
  response that day (``responded``), the sum (``seconds``, for the average), the fastest and the
  slowest. An earlier agent comment that arrives late moves the ticket to its day. A day is
  final for readers two days after it ends (``final_after_s``); a late comment still revises it.

The tables have no team: the nearest fact the ticket row holds is its ``assignee`` (the agent
working it; None while unassigned), so open tickets are counted per assignee. Only tickets whose
record exists (a live ``created_at``) count; an erasure deletes the requester's cells only, so
it changes neither aggregate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from examples.support_desk.schemas import STATUSES, TICKET, TICKET_COMMENT, TICKET_STATUS_LOG
from framework import Aggregate, Contribution, Row, TableSchema, Window, current_state

__all__ = ["OPEN_STATUSES", "DAY_S", "OpenTickets", "FirstResponse", "AGGREGATES"]

#: The statuses of a ticket not yet solved.
OPEN_STATUSES: tuple[str, ...] = ("open", "pending", "reopened")
#: Seconds in a day: the first-response windows' size.
DAY_S = 86_400
_MICROS = 1_000_000


def _ticket(rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
    """The live cells of the ticket row, when its record exists (``created_at``)."""
    live = [r.values() for r in rows[TICKET.name] if r.cells]
    return live[0] if live and live[0].get("created_at") is not None else None


class OpenTickets(Aggregate):
    """Tickets not yet solved per tenant, status and assignee, with their earliest SLA due time."""

    name: ClassVar[str] = "open_tickets"
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET, TICKET_STATUS_LOG)
    group_by: ClassVar[tuple[str, ...]] = ("tenant", "status", "assignee")
    measures = {"tickets": "count", "next_due": "min"}
    buckets: ClassVar[int] = 8

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        ticket = _ticket(rows)
        status = current_state(rows[TICKET_STATUS_LOG.name], STATUSES)
        if ticket is None or status is None or status.state not in OPEN_STATUSES:
            return []
        group = {"tenant": ticket.get("tenant"), "status": status.state, "assignee": ticket.get("assignee")}
        due = ticket.get("sla_due_at")
        measures = {} if due is None else {"next_due": int(due) // _MICROS}
        return [Contribution(group, measures)]


class FirstResponse(Aggregate):
    """Time to first agent response per tenant and UTC day of that response."""

    name: ClassVar[str] = "first_response"
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET, TICKET_COMMENT)
    group_by: ClassVar[tuple[str, ...]] = ("tenant",)
    measures = {"responded": "count", "seconds": "sum", "fastest": "min", "slowest": "max"}
    window: ClassVar[Window | None] = Window(DAY_S)
    final_after_s: ClassVar[float | None] = 2 * DAY_S

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        ticket = _ticket(rows)
        if ticket is None:
            return []
        created = int(ticket["created_at"])
        answers = [
            int(r.key["at"])  # type: ignore[arg-type]
            for r in rows[TICKET_COMMENT.name]
            if r.values().get("author_kind") == "agent" and int(r.key["at"]) >= created  # type: ignore[arg-type]
        ]
        if not answers:
            return []
        first = min(answers)
        seconds = (first - created) // _MICROS
        measures = {"seconds": seconds, "fastest": seconds, "slowest": seconds}
        return [Contribution({"tenant": ticket.get("tenant")}, measures, at=first // _MICROS)]


#: The aggregates the app declares.
AGGREGATES: tuple[Aggregate, ...] = (OpenTickets(), FirstResponse())
