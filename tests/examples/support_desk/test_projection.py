"""The tickets projection over a real SQLite store: status precedence, early enrichment, erasure."""

from __future__ import annotations

import uuid
from pathlib import Path

from examples.support_desk.app import app
from examples.support_desk.projection import TicketProjection
from framework.local_stack import StackInfo
from framework.runtime.mapping import map_event
from framework.runtime.projector import project_partition, read_document, write_document
from stores.open import open_search_index
from tests.app.test_projector import WriteBetweenReads
from tests.examples.support_desk.builders import CREATED, IDENTITY, REF, document, event


def status(state: str, version: int, at: int, by: str = "agent"):
    return event(
        "ticket.status_changed",
        version=version,
        occurred_at=at,
        external_id="4711",
        status=state,
        changed_by=by,
    )


async def test_the_document_holds_the_row_current_status_and_comment_count(tmp_path: Path) -> None:
    events = [
        event("ticket.created", version=10, **CREATED),
        status("open", 11, at=10, by="system"),
        event(
            "comment.added",
            version=30,
            occurred_at=30,
            **IDENTITY,
            comment_id="c1",
            author_kind="agent",
            body="try again",
        ),
        event(
            "comment.added",
            version=40,
            occurred_at=40,
            **IDENTITY,
            comment_id="c2",
            author_kind="requester",
            body="done",
        ),
        # solved and closed in one instant: the declared precedence makes it closed
        status("closed", 51, at=50, by="system"),
        status("solved", 50, at=50),
    ]
    doc_id, doc, version = await document(events, tmp_path)
    assert doc_id == REF.ticket_id and version == 51
    assert doc == {
        "ticket_id": REF.ticket_id,
        **IDENTITY,
        "subject": "Cannot log in",
        "requester_email": "ana.silva@example.com",
        "requester_name": "Ana Silva",
        "priority": "high",
        "created_at": 10,
        "has_record": True,
        "status": "closed",
        "status_at": 50,
        "comment_count": 2,
        "last_comment_at": 40,
    }


async def test_enrichment_before_the_ticket_gives_a_document_without_record(tmp_path: Path) -> None:
    _, doc, version = await document([event("sla.computed", version=5, sla_due_at=900)], tmp_path / "a")
    assert doc == {
        "ticket_id": REF.ticket_id,
        **IDENTITY,
        "sla_due_at": 900,
        "has_record": False,
        "comment_count": 0,
    }
    assert version == 5
    late = [event("sla.computed", version=15, sla_due_at=900), event("ticket.created", version=10, **CREATED)]
    _, doc, _ = await document(late, tmp_path / "b")
    assert doc is not None and doc["has_record"] and doc["sla_due_at"] == 900


async def test_a_ticket_with_only_status_changes_has_no_document(tmp_path: Path) -> None:
    assert (await document([status("open", 11, at=10)], tmp_path))[1:] == (None, 11)


async def test_erasure_removes_the_personal_data_also_from_a_late_created_event(tmp_path: Path) -> None:
    erased = event("requester.erased", version=60, request_id="dsr-1")
    in_order = [event("ticket.created", version=10, **CREATED), status("open", 11, at=10), erased]
    late = [erased, *reversed(in_order[:2]), event("ticket.created", version=10, **CREATED)]
    for name, events in (("in-order", in_order), ("late", late)):
        _, doc, version = await document(events, tmp_path / name)
        assert doc is not None and version == 60, name
        assert "requester_email" not in doc and "requester_name" not in doc, name
        assert doc["subject"] == "Cannot log in" and doc["status"] == "open", name


def test_the_projection_is_partitioned_by_ticket_id() -> None:
    assert [c.name for c in TicketProjection().partition_key] == ["ticket_id"]


async def test_a_write_between_the_reads_of_a_ticket_never_outlives_the_newer_one(stack: StackInfo) -> None:
    """The torn read of ``tests/app/test_projector.py`` on the support desk: a repair reads the
    ticket while the stream writes a new subject @30 and projects it; the repair's document,
    written last, must not bring back the old subject."""
    projection = app.projections[0]
    index = open_search_index(stack.es_url, "document")
    alias = f"tickets-torn-{uuid.uuid4().hex[:8]}"
    await index.ensure_index(alias, projection.mappings)
    try:
        async with WriteBetweenReads(":memory:") as store:
            for schema in app.tables:
                await store.ensure_table(schema)
            created = event("ticket.created", 20, **CREATED)
            await store.apply(map_event(app.route(created), created, app.projections))
            new = event("ticket.updated", 30, **IDENTITY, subject="Still cannot log in")
            store.pending = [map_event(app.route(new), new, app.projections)]
            repairs = await read_document(store, projection, REF.key)
            assert not store.pending  # the write did land between the reads
            assert await project_partition(store, index, projection, REF.key, alias=alias) == ("index", 30)
            await write_document(index, alias, repairs)
            hit = await index.get(alias, REF.ticket_id)
            assert hit is not None and (hit.source["subject"], hit.version) == ("Still cannot log in", 30)
    finally:
        await index.close()
