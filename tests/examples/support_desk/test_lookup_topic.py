"""The support desk's mail agent fed by a topic no agent consumes (issue 22, case 3): the
conversations come from a directory topic declared in ``App(lookup_topics=...)``; the test kit
feeds the lookup from its event type, and any delivery stores the replies under the ticket of
their conversation's final link (a model written here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.support_desk.agents import MailAgent, support_agents
from examples.support_desk.identity import TicketRef
from framework import App, Event
from framework.state import Lookup
from framework.testing import Driver, assert_converges, deliveries
from tests.examples.support_desk.test_mail import reply

DIRECTORY = "support.directory"
_REF = ("tenant", "source", "external_id")
LINKS = Lookup(
    "conversations",
    DIRECTORY,
    key=lambda e: e.payload["conversation_id"],
    value=lambda e: {k: e.payload[k] for k in _REF},
)


class DirectoryMail(MailAgent):
    """The support desk's mail agent, its conversations read from the directory topic."""

    lookups: ClassVar[tuple[Lookup, ...]] = (LINKS,)


#: Without the tickets projection: a reply moved to another ticket leaves the projection's
#: version mark of the first one (``tickets_version``), a residue of joins, not of this feature.
app = App(
    "support-directory",
    agents=[*(a for a in support_agents() if a.name != "mail"), DirectoryMail()],
    lookup_topics={DIRECTORY: ("conversation.linked",)},
)


def linked(conversation: str, ref: TicketRef, version: int) -> Event:
    return Event(f"l-{conversation}-{version}", conversation, version, version, "conversation.linked",
                 {"conversation_id": conversation, **ref.cells})  # fmt: skip


#: (ticket id, comment id) -> {column: value} of ``ticket_comment``.
Comments = dict[tuple[str, str], dict[str, Any]]


def model(history: Sequence[Event]) -> Comments:
    """Each reply under the ticket of its conversation's final link (highest version, then the
    larger canonical JSON value); replies of unlinked conversations nowhere."""
    final: dict[str, tuple[int, str, dict[str, str]]] = {}
    for e in history:
        if e.type == "conversation.linked":
            value = {k: e.payload[k] for k in _REF}
            mine = (e.version, json.dumps(value, sort_keys=True, separators=(",", ":")), value)
            conv = e.payload["conversation_id"]
            if conv not in final or mine[:2] > final[conv][:2]:
                final[conv] = mine
    out: Comments = {}
    for e in history:
        if e.type == "reply.received" and e.payload["conversation_id"] in final:
            ref = TicketRef(**final[e.payload["conversation_id"]][2])
            out[(ref.ticket_id, e.payload["message_id"])] = {
                "author_kind": e.payload["author_kind"],
                "body": e.payload["body"],
            }
    return out


def comments(d: Driver) -> Comments:
    return {(r.key["ticket_id"], r.key["comment_id"]): r.values() for r in d.rows("ticket_comment")}


def test_the_directory_topic_is_created_and_refused_when_undeclared() -> None:
    assert app.topics()[DIRECTORY] == "lookup.conversations"
    with pytest.raises(
        ValueError, match="lookup 'conversations' reads topic 'support.directory', which no agent"
    ):
        App("support-directory", agents=[DirectoryMail()])


TICKETS = [TicketRef("acme", "zendesk", str(n)) for n in range(3)]


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """Links of up to two conversations to tickets (unique versions above every reply's, within
    ~3 ms of them: the join version rule's exact window) and replies to linked conversations."""
    versions = draw(st.lists(st.integers(5000, 5100), min_size=1, max_size=5, unique=True))
    links = [linked(draw(st.sampled_from(["thread-1", "thread-2"])), draw(st.sampled_from(TICKETS)), v)
             for v in versions]  # fmt: skip
    convs = sorted({e.payload["conversation_id"] for e in links})
    replies = [reply(f"m{i}", draw(st.integers(2000, 4999)), draw(st.sampled_from(convs)))
               for i in range(draw(st.integers(1, 4)))]  # fmt: skip
    return draw(st.permutations(links + replies))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_delivery_stores_each_reply_under_its_final_ticket(data: st.DataObject) -> None:
    history = data.draw(histories(), label="history")
    order = data.draw(deliveries(history, max_duplicates=3), label="delivery")
    with Driver(app) as d:
        assert d.send(order) == []
        assert d.pending() == {"mail": []}
        assert comments(d) == model(history) != {}
    assert_converges(app, history, order)
