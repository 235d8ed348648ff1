"""The ``tickets`` search projection: one document per ticket, from its three tables.

The document holds the ticket row's live cells, the current status (derived
from the status log with the declared precedence), the number of comments
and the time of the last one. Personal cells an erasure deleted are simply
not live any more, so they are absent; the framework writes the document at
the partition's version mark, which an erasure raises too, so the erased
document replaces the one before it in the index.

A ticket whose row has no live cell (only status changes or comments have
arrived so far) has no document; ``has_record`` is false while only
enrichment has arrived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from examples.support_desk.schemas import STATUSES, TICKET, TICKET_COMMENT, TICKET_STATUS_LOG
from framework import Projection, Row, TableSchema, current_state

__all__ = ["TICKETS_ALIAS", "TICKETS_MAPPINGS", "TicketProjection"]

TICKETS_ALIAS = "tickets"
_KEYWORD = {"type": "keyword"}
_LONG = {"type": "long"}
#: Elasticsearch mappings of ticket documents (times in integer microseconds).
TICKETS_MAPPINGS: dict[str, Any] = {
    "properties": {
        "ticket_id": _KEYWORD,
        "tenant": _KEYWORD,
        "source": _KEYWORD,
        "external_id": _KEYWORD,
        "subject": {"type": "text"},
        "requester_email": _KEYWORD,
        "requester_name": {"type": "text"},
        "priority": _KEYWORD,
        "assignee": _KEYWORD,
        "created_at": _LONG,
        "sla_due_at": _LONG,
        "sentiment": _KEYWORD,
        "sentiment_score": {"type": "double"},
        "has_record": {"type": "boolean"},
        "status": _KEYWORD,
        "status_at": _LONG,
        "comment_count": {"type": "integer"},
        "last_comment_at": _LONG,
    }
}


class TicketProjection(Projection):
    """Ticket row + current status + comment count -> the ticket document, id ``ticket_id``."""

    name: ClassVar[str] = "tickets"
    alias: ClassVar[str] = TICKETS_ALIAS
    mappings: ClassVar[Mapping[str, Any]] = TICKETS_MAPPINGS
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET, TICKET_STATUS_LOG, TICKET_COMMENT)

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        ticket = [r for r in rows[TICKET.name] if r.cells]
        if not ticket:
            return None
        doc: dict[str, Any] = {"ticket_id": str(key["ticket_id"])}
        doc.update({name: value for name, value in sorted(ticket[0].values().items()) if value is not None})
        doc["has_record"] = "created_at" in doc
        status = current_state(rows[TICKET_STATUS_LOG.name], STATUSES)
        if status is not None:
            doc["status"], doc["status_at"] = status.state, status.at
        comments = [r for r in rows[TICKET_COMMENT.name] if r.cells]
        doc["comment_count"] = len(comments)
        if comments:
            doc["last_comment_at"] = max(int(r.key["at"]) for r in comments)  # type: ignore[arg-type]
        return doc
