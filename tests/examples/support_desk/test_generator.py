"""The history generator exercises what the app must handle; the oracle's rules on small truths."""

from __future__ import annotations

from collections import Counter

from examples.support_desk.generator import generate_history
from examples.support_desk.history import deliver, enrichment_first
from examples.support_desk.oracle import expected_state
from examples.support_desk.truth import Augment, CommentPosted, Erasure, RecordWrite, StatusChange, Truth

PII = ("requester_email", "requester_name")


def test_the_same_seed_gives_the_same_history() -> None:
    a, b, c = generate_history(4, 20), generate_history(4, 20), generate_history(5, 20)
    assert a.events == b.events and a.events != c.events
    assert deliver(a.events, 1) == deliver(b.events, 1) != deliver(a.events, 2)


def test_histories_are_in_source_order_with_unique_ids_and_increasing_versions_per_ticket() -> None:
    events = generate_history(9, 100).events
    assert [e.version for e in events] == sorted(e.version for e in events)
    assert len({e.event_id for e in events}) == len(events)
    per_ticket: dict[str, list[int]] = {}
    for e in events:
        per_ticket.setdefault(e.ordering_key, []).append(e.version)
    assert len(per_ticket) == 100
    assert all(len(set(vs)) == len(vs) for vs in per_ticket.values())


def test_histories_exercise_early_enrichment_ties_clearing_and_erasure() -> None:
    history = generate_history(9, 100)
    types = Counter(e.type for e in history.events)
    assert set(types) == {
        "ticket.created",
        "ticket.updated",
        "comment.added",
        "ticket.status_changed",
        "sla.computed",
        "sentiment.scored",
        "requester.erased",
    }
    assert enrichment_first(history.events) > 5  # scored before the helpdesk filed the ticket
    statuses = [e for e in history.events if e.type == "ticket.status_changed"]
    same_instant = Counter((e.ordering_key, e.occurred_at) for e in statuses)
    assert any(n > 1 for n in same_instant.values())
    assert any(e.payload.get("assignee", "") is None for e in history.events)
    assert any(e.type == "sentiment.scored" and e.payload["sentiment"] is None for e in history.events)
    erased: dict[str, int] = {
        e.ordering_key: e.version for e in history.events if e.type == "requester.erased"
    }
    assert len(erased) > 10
    late_pii = [
        e
        for e in history.events
        if e.ordering_key in erased and e.version > erased[e.ordering_key] and set(PII) & set(e.payload)
    ]
    assert late_pii == []


def test_delivery_scrambles_duplicates_and_delivers_everything() -> None:
    events = generate_history(2, 50).events
    arrival = deliver(events, 2)
    assert {e.event_id for e in arrival} == {e.event_id for e in events} and len(arrival) > len(events)
    assert arrival != list(events) and enrichment_first(arrival) > enrichment_first(events)


def test_the_oracle_shadows_personal_cells_up_to_the_erasure_only() -> None:
    truth = Truth()
    t = truth.ticket("acme", "zendesk", "1")
    t.apply(
        RecordWrite(
            {"subject": "Hi", "requester_email": "A@X.example", "requester_name": "A", "created_at": 10}
        ),
        10,
        "e1",
    )
    t.apply(Erasure(), 20, "e2")
    t.apply(RecordWrite({"requester_name": "anonymous"}), 30, "e3")
    expected = expected_state(truth)
    assert expected.tickets[t.ticket_id] == {
        "tenant": ("acme", 30),
        "source": ("zendesk", 30),
        "external_id": ("1", 30),
        "subject": ("Hi", 10),
        "created_at": (10, 10),
        "requester_name": ("anonymous", 30),
    }
    assert expected.documents[t.ticket_id][1] == 30


def test_the_oracle_versions_documents_by_the_newest_event_and_needs_a_ticket_row() -> None:
    truth = Truth()
    t = truth.ticket("acme", "zendesk", "1")
    t.apply(Augment({"sla_due_at": 99, "sentiment": None}), 5, "e1")
    t.apply(StatusChange("solved", 40, "agent", 1), 40, "e2")
    t.apply(StatusChange("closed", 40, "system", 2), 41, "e3")
    t.apply(CommentPosted("c1", 35, "agent", "done"), 35, "e4")
    t.apply(Erasure(), 50, "e5")
    only_status = truth.ticket("acme", "zendesk", "2")
    only_status.apply(StatusChange("open", 7, "system", 1), 7, "e6")
    expected = expected_state(truth)
    doc, version = expected.documents[t.ticket_id]
    assert version == 50
    assert doc == {
        "ticket_id": t.ticket_id,
        "tenant": "acme",
        "source": "zendesk",
        "external_id": "1",
        "sla_due_at": 99,
        "has_record": False,
        "status": "closed",
        "status_at": 40,
        "comment_count": 1,
        "last_comment_at": 35,
    }
    assert (
        only_status.ticket_id not in expected.documents and expected.status[only_status.ticket_id] == "open"
    )
