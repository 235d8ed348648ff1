"""The support desk's agents, one per topic; each ``handle`` is a pure function of the event.

Every agent keys its writes by the ticket its ordering key names (see
``examples.support_desk.identity``) and writes at the event's version, so
any arrival order converges:

- ``TicketAgent``: ticket created/updated -> the record's cells (updates carry
  only what changed; a ``None`` assignee clears the cell); a comment -> one
  ``ticket_comment`` row at ``(occurred_at, comment_id)``; a created event
  that names its requester (``requester_id``, the CRM's person id) -> one
  ``requester_ticket`` row under that id (the runtime resolves it through the
  ID map when the CRM has converted, merged or deleted the id).
- ``StatusAgent``: a status change -> one ``ticket_status_log`` entry.
- ``EnrichmentAgent``: SLA due time and sentiment -> augmented cells of the
  ticket row, also before the ticket's created event arrives.
- ``PrivacyAgent``: the requester's erasure -> a tombstone over the ticket's
  personal cells at the erasure's version. It shadows every older write of
  them, also one that arrives later (a replayed or late created event); it
  leaves the rest of the ticket, its status and its comments alone.
- ``MailAgent``: a reply from the mail gateway names only its conversation
  (the email thread); the lookup ``conversations``, fed by the ticket events
  that carry a ``conversation_id``, resolves it to the ticket, and the reply
  becomes a ``ticket_comment`` row of that ticket. A reply that arrives
  before its ticket waits for it; a ticket update that takes over the
  conversation (a merge) moves its replies to the new ticket.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from examples.support_desk.identity import TicketRef
from examples.support_desk.payloads import (
    TOPIC_ENRICHMENT,
    TOPIC_MAIL,
    TOPIC_PRIVACY,
    TOPIC_STATUS,
    TOPIC_TICKETS,
    payload,
    types_on,
)
from examples.support_desk.schemas import (
    PII_COLUMNS,
    RECORD_COLUMNS,
    REQUESTER_TICKET,
    TICKET,
    TICKET_COMMENT,
    TICKET_STATUS_LOG,
)
from framework import Delete, Event, KeyedAgent, LogState, TableSchema, Upsert
from framework.state import Lookup, StateView

__all__ = [
    "TicketAgent",
    "StatusAgent",
    "EnrichmentAgent",
    "PrivacyAgent",
    "MailAgent",
    "CONVERSATIONS",
    "support_agents",
]


class TicketAgent(KeyedAgent):
    """The helpdesk's tickets and comments."""

    name: ClassVar[str] = "tickets"
    topic: ClassVar[str] = TOPIC_TICKETS
    event_types: ClassVar[tuple[str, ...]] = types_on(TOPIC_TICKETS)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET, TICKET_COMMENT, REQUESTER_TICKET)

    def handle(self, event: Event) -> Iterable[Upsert]:
        fields = payload(event, self.topic)
        ref = TicketRef.of(event)
        if event.type == "comment.added":
            key = {**ref.key, "at": event.occurred_at, "comment_id": fields["comment_id"]}
            cells = {"author_kind": fields["author_kind"], "body": fields["body"]}
            return [Upsert(TICKET_COMMENT.name, key, cells, event.version)]
        cells = {**ref.cells, **{k: v for k, v in fields.items() if k in RECORD_COLUMNS}}
        if event.type == "ticket.created":
            cells["created_at"] = event.occurred_at
        out = [Upsert(TICKET.name, ref.key, cells, event.version)]
        if "requester_id" in fields:
            key = {"tenant": ref.tenant, "requester_id": fields["requester_id"], **ref.key}
            owned: dict[str, str | int] = {
                "source": ref.source,
                "external_id": ref.external_id,
                "created_at": event.occurred_at,
            }
            out.append(Upsert(REQUESTER_TICKET.name, key, owned, event.version))
        return out


class StatusAgent(KeyedAgent):
    """The helpdesk's status webhook: one state log entry per change."""

    name: ClassVar[str] = "status"
    topic: ClassVar[str] = TOPIC_STATUS
    event_types: ClassVar[tuple[str, ...]] = types_on(TOPIC_STATUS)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET_STATUS_LOG,)

    def handle(self, event: Event) -> Iterable[LogState]:
        fields = payload(event, self.topic)
        ref = TicketRef.of(event)
        return [
            LogState(
                TICKET_STATUS_LOG.name,
                ref.key,
                state=fields["status"],
                at=event.occurred_at,
                event_id=event.event_id,
                version=event.version,
                attrs={"changed_by": fields["changed_by"]},
            )
        ]


class EnrichmentAgent(KeyedAgent):
    """The SLA policy service and the sentiment scorer: augmented cells of the ticket row."""

    name: ClassVar[str] = "enrichment"
    topic: ClassVar[str] = TOPIC_ENRICHMENT
    event_types: ClassVar[tuple[str, ...]] = types_on(TOPIC_ENRICHMENT)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        fields = payload(event, self.topic)
        ref = TicketRef.of(event)
        return [Upsert(TICKET.name, ref.key, {**ref.cells, **fields}, event.version)]


class PrivacyAgent(KeyedAgent):
    """Erasure requests: delete the requester's personal cells of the ticket."""

    name: ClassVar[str] = "privacy"
    topic: ClassVar[str] = TOPIC_PRIVACY
    event_types: ClassVar[tuple[str, ...]] = types_on(TOPIC_PRIVACY)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)

    def handle(self, event: Event) -> Iterable[Delete]:
        payload(event, self.topic)
        ref = TicketRef.of(event)
        return [Delete(TICKET.name, ref.key, event.version, columns=PII_COLUMNS)]


def _conversation(event: Event) -> str | None:
    if event.type not in ("ticket.created", "ticket.updated"):
        return None
    return event.payload.get("conversation_id")


def _ticket_of(event: Event) -> dict[str, Any]:
    return TicketRef.of(event).cells


#: conversation_id -> the ticket (tenant, source, external_id) it belongs to, from the ticket events.
CONVERSATIONS = Lookup("conversations", TOPIC_TICKETS, key=_conversation, value=_ticket_of)


class MailAgent(KeyedAgent):
    """Replies from the mail gateway: a comment of the ticket their conversation belongs to."""

    name: ClassVar[str] = "mail"
    topic: ClassVar[str] = TOPIC_MAIL
    event_types: ClassVar[tuple[str, ...]] = types_on(TOPIC_MAIL)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET_COMMENT,)
    lookups: ClassVar[tuple[Lookup, ...]] = (CONVERSATIONS,)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        fields = payload(event, self.topic)
        ref = TicketRef(**state.value("conversations", fields["conversation_id"]))
        key = {**ref.key, "at": event.occurred_at, "comment_id": fields["message_id"]}
        cells = {"author_kind": fields["author_kind"], "body": fields["body"]}
        return [Upsert(TICKET_COMMENT.name, key, cells, event.version)]


def support_agents() -> list[KeyedAgent]:
    """One instance of each agent of the support desk."""
    return [TicketAgent(), StatusAgent(), EnrichmentAgent(), PrivacyAgent(), MailAgent()]
