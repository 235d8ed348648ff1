"""Tables of the support desk, all partitioned by ``ticket_id``.

- ``ticket``: one row per ticket. The helpdesk writes the record (subject,
  requester, priority, assignee, ``created_at``); the SLA service and the
  sentiment scorer write augmented cells into the same row by natural key,
  also before the record exists. Every writer also writes the identity cells.
- ``ticket_status_log``: the ticket's status changes, a state log clustered by
  ``(at, event_id)``; the current status is derived, never stored.
- ``ticket_comment``: one row per comment, clustered by ``(at, comment_id)``.

``requester_ticket`` is partitioned by ``(tenant, requester_id)`` instead: the
tickets of one requester (the CRM's person id), one row per ticket. It is the
app's owner table for ID mutation (``id_mutation.py``): when the CRM converts,
merges or deletes a requester id, its rows move to the final id.
"""

from __future__ import annotations

from framework import Column, TableSchema, state_log_schema

__all__ = [
    "TICKET",
    "TICKET_STATUS_LOG",
    "TICKET_COMMENT",
    "REQUESTER_TICKET",
    "TABLES",
    "STATUSES",
    "PRIORITIES",
    "SENTIMENTS",
    "PII_COLUMNS",
    "RECORD_COLUMNS",
    "AUGMENTED_COLUMNS",
]

_TICKET_ID = (Column("ticket_id", "text"),)

#: Ticket statuses in precedence order: of two changes at the same ``at``, the later one here wins.
STATUSES: tuple[str, ...] = ("open", "pending", "reopened", "solved", "closed")
PRIORITIES: tuple[str, ...] = ("low", "normal", "high", "urgent")
SENTIMENTS: tuple[str, ...] = ("negative", "neutral", "positive")

#: The requester's personal data: what an erasure deletes.
PII_COLUMNS: tuple[str, ...] = ("requester_email", "requester_name")
#: Cells of the helpdesk's record (``created_at`` marks that the record exists).
RECORD_COLUMNS: tuple[str, ...] = ("subject", *PII_COLUMNS, "priority", "assignee", "created_at")
#: Cells the enrichment services write.
AUGMENTED_COLUMNS: tuple[str, ...] = ("sla_due_at", "sentiment", "sentiment_score")

TICKET = TableSchema(
    name="ticket",
    partition_key=_TICKET_ID,
    columns=(
        Column("tenant", "text"),
        Column("source", "text"),
        Column("external_id", "text"),
        Column("subject", "text"),
        Column("requester_email", "text"),
        Column("requester_name", "text"),
        Column("priority", "text"),
        Column("assignee", "text"),
        Column("created_at", "bigint"),  # microseconds
        Column("sla_due_at", "bigint"),  # microseconds
        Column("sentiment", "text"),
        Column("sentiment_score", "double"),  # in [-1, 1]
    ),
)

TICKET_STATUS_LOG = state_log_schema(
    "ticket_status_log", partition_key=_TICKET_ID, attrs=(Column("changed_by", "text"),)
)

TICKET_COMMENT = TableSchema(
    name="ticket_comment",
    partition_key=_TICKET_ID,
    clustering_key=(Column("at", "bigint"), Column("comment_id", "text")),
    columns=(Column("author_kind", "text"), Column("body", "text")),
)

REQUESTER_TICKET = TableSchema(
    name="requester_ticket",
    partition_key=(Column("tenant", "text"), Column("requester_id", "text")),
    clustering_key=(Column("ticket_id", "text"),),
    columns=(Column("source", "text"), Column("external_id", "text"), Column("created_at", "bigint")),
)

TABLES: tuple[TableSchema, ...] = (TICKET, TICKET_STATUS_LOG, TICKET_COMMENT, REQUESTER_TICKET)
