"""Erasure reaches the stream's join agents: the deny-list screen runs on their writes, first
mappings and re-mappings after an entry change alike, through the test kit and the worker's wiring.

Before: ``JoinBook.plan`` never ran the screen, so an erased subject came back in a row the
erasure never saw (a reply that waited for its entry, a row moved to another parent).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from examples.support_desk.agents import support_agents
from examples.support_desk.app import app as support_desk
from examples.support_desk.identity import TicketRef
from examples.support_desk.payloads import TOPIC_MAIL
from examples.support_desk.personal import PERSONAL_DATA
from framework import App, Event, PersonalData
from framework.erasure.declare import Subject
from framework.erasure.run import erase
from framework.erasure.verify import verify
from framework.local_stack import StackInfo
from framework.runtime.work import Work
from framework.settings import Settings
from framework.testing import Driver
from framework.worker.wiring import build_worker
from stores.open import open_wide_store
from tests.examples.support_desk.builders import CREATED, REF, event
from tests.state.join_app import ChildAgent, ParentAgent, child, parent_set

SUBJECT = Subject("email", "Ann@X.io")


def join_app(name: str = "join-erasure") -> App:
    """The join test app with personal data: a message whose body is an address goes whole, a
    parent label that is one is tombstoned (on the parent row and on every message)."""
    return App(
        name,
        agents=[ParentAgent(), ChildAgent()],
        personal_data=[
            PersonalData("email", "msg", columns=("body",), normalize=str.lower),
            PersonalData("email", "msg", columns=("label",), erase=("label",), normalize=str.lower),
            PersonalData("email", "parent_row", columns=("label",), erase=("label",), normalize=str.lower),
        ],
    )


def _msgs(d: Driver) -> dict[tuple[str, str], dict[str, object]]:
    return {(str(r.key["parent"]), str(r.key["msg_id"])): r.values() for r in d.rows("msg")}


def test_a_join_agent_writes_nothing_of_an_erased_subject_mapped_or_remapped(erasure_key: bytes) -> None:
    app = join_app()
    with Driver(app) as d:
        d.send(parent_set("c1", "P1", "plain", 10))
        d.send([child("m1", "c1", "ann@x.io", 100), child("m2", "c1", "hello", 110)])
        assert set(_msgs(d)) == {("P1", "m1"), ("P1", "m2")}
        d.run(erase(app, SUBJECT, key=erasure_key, store=d.store))
        assert set(_msgs(d)) == {("P1", "m2")}
        # an entry change moves every message of c1 to P2: m1 must not come back under P2
        d.send(parent_set("c1", "P2", "plain", 200))
        # a new message of the subject waits for c3, then is mapped when c3 arrives
        d.send(child("m3", "c3", "ANN@x.io", 120))
        assert d.pending()["children"] == [("c-m3", "parent", "c3")]
        d.send(parent_set("c3", "P3", "plain", 210))
        assert _msgs(d) == {("P2", "m2"): {"body": "hello", "conv": "c1", "label": "plain"}}
        # an entry whose label is the subject: re-mapped messages keep everything but the label
        d.send(parent_set("c1", "P4", "Ann@x.IO", 300))
        assert _msgs(d) == {("P4", "m2"): {"body": "hello", "conv": "c1"}}
        assert d.parked == [] and d.pending()["children"] == []
        assert d.screen is not None and d.screen.current is not None and d.screen.current.suppressed >= 4
        assert d.run(verify(app, SUBJECT, key=erasure_key, store=d.store)) == []


def _support_desk_with_reply_addresses() -> App:
    """The support desk, also declaring a reply body's words as addresses (a reply quoting the
    requester's address): its ``MailAgent`` is a join agent writing a declared table."""
    quoted = PersonalData("email", "ticket_comment", columns=("body",), separator=" ", erase=("body",),
                          normalize=str.lower)  # fmt: skip
    return App(
        "support-desk",
        agents=support_agents(),
        projections=list(support_desk.projections),
        personal_data=(*PERSONAL_DATA, quoted),
        notifications=True,
        id_mutation=support_desk.id_mutation,
    )


def _reply(message_id: str, version: int, body: str) -> Event:
    return Event(f"r-{message_id}", "thread-1", version, version, "reply.received",
                 {"conversation_id": "thread-1", "message_id": message_id, "author_kind": "requester",
                  "body": body})  # fmt: skip


def test_the_support_desk_mail_agent_screens_replies_after_an_erasure(erasure_key: bytes) -> None:
    app = _support_desk_with_reply_addresses()
    other = TicketRef("acme", "zendesk", "4712")
    address = str(CREATED["requester_email"])
    subject = Subject("email", address.lower())
    with Driver(app) as d:
        d.send(event("ticket.created", 100, **CREATED, conversation_id="thread-1"))
        d.send(_reply("m1", 300, f"write to {address} please"), topic=TOPIC_MAIL)
        assert [r.values()["body"] for r in d.partition("ticket_comment", REF.key)] == [
            f"write to {address} please"
        ]
        report = d.run(erase(app, subject, key=erasure_key, store=d.store, index=d.index))
        assert report.cells == {"ticket": 1, "ticket_comment": 1}
        # another ticket takes the conversation over: m1 moves, without its body
        bo = {**CREATED, "external_id": "4712", "requester_email": "bo@example.com"}
        d.send(event("ticket.created", 200, key=other.ordering_key, **bo))
        merge = {"tenant": "acme", "source": "zendesk", "external_id": "4712", "conversation_id": "thread-1"}
        d.send(event("ticket.updated", 500, key=other.ordering_key, **merge))
        d.send(_reply("m2", 600, f"again: {address.upper()}"), topic=TOPIC_MAIL)
        d.send(_reply("m3", 700, "no address here"), topic=TOPIC_MAIL)
        moved = {str(r.key["comment_id"]): r.values() for r in d.partition("ticket_comment", other.key)}
        assert moved == {
            "m1": {"author_kind": "requester"},
            "m2": {"author_kind": "requester"},
            "m3": {"author_kind": "requester", "body": "no address here"},
        }
        assert d.parked == []
        assert d.run(verify(app, subject, key=erasure_key, store=d.store, index=d.index)) == []


async def test_the_worker_wires_the_screen_into_the_join_processor(
    stack: StackInfo, tmp_path: Path, erasure_key: bytes
) -> None:
    """The worker's wiring on the session's noida-db and a SQLite store: the subject is erased
    in the store before the worker starts; the join agent's first mapping and its re-mapping
    after an entry change write nothing of it."""
    name = f"join-erasure-{uuid.uuid4().hex[:8]}"
    app = join_app(name)
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    store = await open_wide_store(url)
    try:
        for schema in app.tables:
            await store.ensure_table(schema)
        await erase(app, SUBJECT, key=erasure_key, store=store)
    finally:
        await store.close()
    env = {
        "CONVERGE_DATA_DIR": str(tmp_path / "data"),
        "CONVERGE_BROKER": f"kafka://{stack.kafka_bootstrap}",
        "CONVERGE_WIDE_STORE": url,
        "CONVERGE_PARTITIONS": "1",
    }
    worker = build_worker(app, Settings.resolve(name, env=env))
    for hook in worker.starting:
        await hook()
    try:
        runtimes = {r.name: r for r in worker.converge.runtimes}
        processor = runtimes["children"].processor
        processor.assign([0])
        entries = processor.book.entries.__self__  # the worker's entry tables (its feed applies to them)
        await processor.remap(entries.feed("t.parents", parent_set("c1", "P1", "plain", 10)))
        for i, e in enumerate([child("m1", "c1", "ann@x.io", 100), child("m2", "c1", "hi", 110)]):
            work = Work(("t.children", 0), i, e.ordering_key.encode(), e.to_json())
            processor.prepare(work)
            await processor(work)
        await processor.remap(entries.feed("t.parents", parent_set("c1", "P2", "ANN@X.IO", 200)))
        await processor.settle()
        rows = [row async for row in worker.converge.resources.store.scan("msg")]
        assert {(r.key["parent"], r.key["msg_id"]): r.values() for r in rows} == {
            ("P2", "m2"): {"body": "hi", "conv": "c1"}
        }
    finally:
        for hook in reversed(worker.stopped):
            await hook()
