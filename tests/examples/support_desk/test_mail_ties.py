"""Issue 22, case 2 on the support desk: two tickets claim one conversation at the same version.
The replies land under the ticket the lookup keeps (``tests.state.join_model``: version, rank,
UTF-8 bytes) at the join's write version, whatever the delivery order."""

from __future__ import annotations

import itertools

from examples.support_desk.app import app
from examples.support_desk.identity import TicketRef
from examples.support_desk.payloads import TOPIC_MAIL
from framework import Event
from framework.testing import Driver
from tests.examples.support_desk.builders import CREATED, REF, event
from tests.state import join_model as model

OTHER = TicketRef("acme", "zendesk", "4712")


def reply(message_id: str, version: int) -> Event:
    return Event(f"r-{message_id}", "thread-1", version, version, "reply.received",
                 {"conversation_id": "thread-1", "message_id": message_id, "author_kind": "requester",
                  "body": f"body of {message_id}"})  # fmt: skip


def claim(ref: TicketRef, version: int) -> Event:
    """The ticket ``ref`` takes over conversation ``thread-1`` at ``version``."""
    payload = {**CREATED, "external_id": ref.external_id, "conversation_id": "thread-1"}
    return event("ticket.updated", version, key=ref.ordering_key, **payload)


def test_replies_follow_the_ticket_the_lookup_keeps_on_an_equal_version_claim() -> None:
    keeps = max((REF, OTHER), key=lambda ref: model.entry_order(500, dict(ref.cells)))
    loses = OTHER if keeps is REF else REF
    w = {m: model.Near(v, 1) for m, v in (("m1", 300), ("m2", 400))}  # at most one re-mapping
    other = {**CREATED, "external_id": OTHER.external_id}
    created = [
        event("ticket.created", 100, **CREATED),
        event("ticket.created", 100, key=OTHER.ordering_key, **other),
    ]
    late = [claim(REF, 500), claim(OTHER, 500)]
    for first, second in itertools.permutations(late):
        with Driver(app) as d:
            d.send(created)
            d.send(first)
            assert d.send([reply("m1", 300), reply("m2", 400)], topic=TOPIC_MAIL) == []
            d.send(second)  # the replies were mapped with the first claim
            rows = {r.key["comment_id"]: (r.values()["body"], r.version)
                    for r in d.partition("ticket_comment", keeps.key)}  # fmt: skip
            assert rows == {m: (f"body of {m}", w[m]) for m in w}
            assert d.partition("ticket_comment", loses.key) == []
