"""Replies from the mail gateway carry only their conversation: the lookup resolves them to the
ticket's natural key, also when they arrive first, and moves them when a ticket takes over the
conversation."""

from __future__ import annotations

from examples.support_desk.app import app
from examples.support_desk.identity import TicketRef
from examples.support_desk.payloads import TOPIC_MAIL
from framework import Event
from framework.testing import Driver
from tests.examples.support_desk.builders import CREATED, REF, event
from tests.state.join_model import Near

OTHER = TicketRef("acme", "zendesk", "4712")


def reply(message_id: str, version: int, conversation: str = "thread-1") -> Event:
    return Event(f"r-{message_id}", conversation, version, version, "reply.received",
                 {"conversation_id": conversation, "message_id": message_id, "author_kind": "requester",
                  "body": f"body of {message_id}"})  # fmt: skip


def at(reply_version: int, ticket_version: int, ref: TicketRef) -> Near:
    """The join's write version of a reply mapped with the ticket's entry (docs, version rule):
    the reply's own version, plus one for each time a changed ticket mapped it again."""
    return Near(reply_version, 4)


def comments(d: Driver, ref: TicketRef) -> dict[str, tuple[str, int]]:
    rows = d.partition("ticket_comment", ref.key)
    return {r.key["comment_id"]: (r.values()["body"], r.version) for r in rows}


def test_a_reply_waits_for_its_ticket_then_lands_in_its_comments() -> None:
    with Driver(app) as d:
        assert d.send(reply("m1", 300), topic=TOPIC_MAIL) == []
        assert d.pending()["mail"] == [("r-m1", "conversations", "thread-1")]
        d.send(event("ticket.created", 100, **CREATED, conversation_id="thread-1"))
        assert comments(d, REF) == {"m1": ("body of m1", at(300, 100, REF))}
        assert d.pending()["mail"] == []
        doc = d.documents("tickets")
        assert len(doc) == 1


def test_a_merge_moves_the_replies_to_the_ticket_that_took_the_conversation_over() -> None:
    with Driver(app) as d:
        d.send(event("ticket.created", 100, **CREATED, conversation_id="thread-1"))
        d.send([reply("m1", 300), reply("m2", 400)], topic=TOPIC_MAIL)
        other = {**CREATED, "external_id": OTHER.external_id}
        d.send(event("ticket.created", 200, key=OTHER.ordering_key, **other))
        merge = {"tenant": "acme", "source": "zendesk", "external_id": OTHER.external_id,
                 "conversation_id": "thread-1"}  # fmt: skip
        d.send(event("ticket.updated", 500, key=OTHER.ordering_key, **merge))
        assert comments(d, REF) == {}
        moved = {"m1": ("body of m1", at(300, 500, OTHER)), "m2": ("body of m2", at(400, 500, OTHER))}
        assert comments(d, OTHER) == moved
        d.send(event("ticket.created", 100, **CREATED, conversation_id="thread-1"))  # a late replay
        assert comments(d, OTHER) == moved


def test_a_bad_reply_is_parked() -> None:
    with Driver(app) as d:
        bad = Event("r-x", "thread-1", 1, 1, "reply.received", {"conversation_id": "thread-1"})
        assert [p.stage for p in d.send(bad, topic=TOPIC_MAIL)] == ["map"]
