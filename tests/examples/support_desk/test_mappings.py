"""The support desk's mappings: each event type's mutations, its keys, and bad payloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.support_desk.agents import EnrichmentAgent, PrivacyAgent, StatusAgent, TicketAgent
from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.identity import TicketKeyError, TicketRef
from examples.support_desk.payloads import SPECS, PayloadError, UnknownEventType
from examples.support_desk.schemas import TICKET, TICKET_COMMENT, TICKET_STATUS_LOG
from framework import BadMessage, Delete, LogState, Upsert, natural_key
from tests.examples.support_desk.builders import CREATED, IDENTITY, REF, event

KEY = {"ticket_id": natural_key("ticket", "acme", "zendesk", "4711")}


def test_app_wires_its_agents_the_tickets_projection_and_aggregates_in_a_few_lines() -> None:
    source = Path("examples/support_desk/app.py").read_text()
    assert len(source.splitlines()) <= 22
    assert [a.name for a in app.agents] == ["tickets", "status", "enrichment", "privacy", "mail"]
    assert set(app.topics()) == {
        "support.tickets",
        "support.status",
        "support.enrichment",
        "support.privacy",
        "support.mail",
        "support-desk.tickets.changes",
        *(f"support-desk.{a}.{t}" for a in ("open_tickets", "first_response") for t in ("changes", "groups")),
    }
    assert {t.name for t in app.tables} == {
        "ticket",
        "ticket_status_log",
        "ticket_comment",
        "requester_ticket",  # the owner table of ID mutation (requester ids)
        "converge_id_routes",  # ID mutation's record of cells it moved or dropped
        "tickets_version",
        "converge_erasure_denylist",  # personal data declared: erasure keeps a deny-list and audit
        "converge_erasure_audit",
        *(
            f"{a}_{t}"
            for a in ("open_tickets", "first_response")
            for t in ("contrib", "members", "buckets", "totals", "version")
        ),
    }
    assert {t for a in app.agents for t in a.event_types} == set(SPECS)
    assert app.views_of(app.agent("privacy")) == app.views  # both aggregates read the ticket row


def test_the_ordering_key_is_the_ticket_reference() -> None:
    assert TicketRef.parse("acme/zendesk/4711") == REF
    assert TicketRef.parse("acme/zendesk/a/b").external_id == "a/b"
    assert REF.key == KEY


def test_created_writes_the_whole_record_with_a_lower_case_email() -> None:
    [m] = TicketAgent().handle(event("ticket.created", version=7, occurred_at=5, **CREATED))
    assert m == Upsert(
        "ticket",
        KEY,
        {
            **IDENTITY,
            "subject": "Cannot log in",
            "requester_email": "ana.silva@example.com",
            "requester_name": "Ana Silva",
            "priority": "high",
            "created_at": 5,
        },
        7,
    )
    TICKET.check_cells(m.cells)


def test_updates_write_only_what_changed_and_none_clears_the_assignee() -> None:
    [m] = TicketAgent().handle(event("ticket.updated", version=9, **IDENTITY, assignee=None, priority="low"))
    assert m == Upsert("ticket", KEY, {**IDENTITY, "assignee": None, "priority": "low"}, 9)


def test_a_comment_is_a_clustered_row_at_its_time() -> None:
    e = event(
        "comment.added",
        version=12,
        occurred_at=11,
        **IDENTITY,
        comment_id="c1",
        author_kind="requester",
        body="any update?",
    )
    [m] = TicketAgent().handle(e)
    assert m == Upsert(
        "ticket_comment",
        {**KEY, "at": 11, "comment_id": "c1"},
        {"author_kind": "requester", "body": "any update?"},
        12,
    )
    TICKET_COMMENT.check_key(m.key)


def test_a_status_change_appends_to_the_state_log_with_only_the_external_id_in_its_payload() -> None:
    e = event(
        "ticket.status_changed",
        version=21,
        occurred_at=20,
        external_id="4711",
        status="solved",
        changed_by="agent",
    )
    [m] = StatusAgent().handle(e)
    assert m == LogState("ticket_status_log", KEY, "solved", 20, e.event_id, 21, {"changed_by": "agent"})
    TICKET_STATUS_LOG.check_key(m.as_upsert().key)


def test_enrichment_carries_no_identity_and_lands_in_the_ticket_row() -> None:
    [sla] = EnrichmentAgent().handle(event("sla.computed", version=3, sla_due_at=99))
    [mood] = EnrichmentAgent().handle(
        event("sentiment.scored", version=4, sentiment=None, sentiment_score=None)
    )
    assert sla == Upsert("ticket", KEY, {**IDENTITY, "sla_due_at": 99}, 3)
    assert mood == Upsert("ticket", KEY, {**IDENTITY, "sentiment": None, "sentiment_score": None}, 4)


def test_erasure_deletes_the_personal_cells_at_its_version() -> None:
    [m] = PrivacyAgent().handle(event("requester.erased", version=50, request_id="dsr-1"))
    assert m == Delete("ticket", KEY, 50, columns=("requester_email", "requester_name"))


def test_every_generated_event_maps_into_its_declared_tables() -> None:
    for e in generate_history(3, 40).events:
        agent = app.route(e)
        for m in agent.handle(e):
            schema = next(t for t in agent.tables if t.name == m.table)
            row = m.as_upsert() if isinstance(m, LogState) else m
            schema.check_key(row.key)
            if isinstance(row, Upsert):
                schema.check_cells(row.cells)


BAD = [
    (
        "ticket.created",
        {k: v for k, v in CREATED.items() if k != "subject"},
        None,
        PayloadError,
        "ticket.created: payload.subject: missing",
    ),
    ("ticket.created", {**CREATED, "colour": "red"}, None, PayloadError, "payload.colour: unknown field"),
    (
        "ticket.created",
        {**CREATED, "priority": 3},
        None,
        PayloadError,
        "payload.priority: must be one of ['low', 'normal', 'high', 'urgent'], got 3",
    ),
    (
        "ticket.created",
        {**CREATED, "requester_email": "ana at example"},
        None,
        PayloadError,
        "payload.requester_email: 'ana at example' is not an email address",
    ),
    ("ticket.updated", IDENTITY, None, PayloadError, "ticket.updated: payload.subject|requester_email"),
    (
        "sla.computed",
        {"sla_due_at": True},
        None,
        PayloadError,
        "sla.computed: payload.sla_due_at: must be integer microseconds, got bool",
    ),
    (
        "sentiment.scored",
        {"sentiment": "angry", "sentiment_score": 0.1},
        None,
        PayloadError,
        "payload.sentiment: must be one of",
    ),
    (
        "sentiment.scored",
        {"sentiment": "neutral", "sentiment_score": 2},
        None,
        PayloadError,
        "payload.sentiment_score: must be a number in [-1, 1], got 2",
    ),
    ("requester.erased", {}, None, PayloadError, "requester.erased: payload.request_id: missing"),
    ("ticket.merged", IDENTITY, None, UnknownEventType, "type: 'ticket.merged' is not an event type of"),
    (
        "ticket.created",
        {**CREATED, "tenant": "globex"},
        None,
        TicketKeyError,
        "payload.tenant: 'globex' does not match the ordering key 'acme/zendesk/4711'",
    ),
    (
        "ticket.status_changed",
        {"external_id": "9", "status": "open", "changed_by": "agent"},
        None,
        TicketKeyError,
        "payload.external_id: '9' does not match",
    ),
    (
        "requester.erased",
        {"request_id": "dsr-1"},
        "acme/zendesk",
        TicketKeyError,
        "ordering_key: 'acme/zendesk' is not '<tenant>/<source>/<external_id>'",
    ),
]


@pytest.mark.parametrize(("type_", "payload", "key", "error", "text"), BAD)
def test_bad_events_raise_a_bad_message_naming_the_problem(
    type_: str, payload: dict, key: str | None, error: type[BadMessage], text: str
) -> None:
    agent = app.agent("tickets") if type_ not in SPECS else app.route(event(type_))
    with pytest.raises(error) as caught:
        list(agent.handle(event(type_, key=key, **payload)))
    assert isinstance(caught.value, BadMessage)
    assert text in str(caught.value)


def test_an_event_type_of_another_topic_is_refused() -> None:
    with pytest.raises(
        UnknownEventType, match="'requester.erased' is not an event type of 'support.tickets'"
    ):
        list(TicketAgent().handle(event("requester.erased", request_id="dsr-1")))
