"""Seeded, in-order event histories of the support desk, with their ground truth.

``generate_history(seed, n_tickets)`` plans the life of each ticket in
source-time order: sometimes scored by the sentiment model from the inbound
mail before the helpdesk files it, created (status ``open``), then a few
steps among updates (priority with a new SLA due time, assignee set or
cleared, subject, requester), comments, status changes (pending, solved, and
sometimes closed in the same instant, reopened), re-scoring, and for some
tickets the requester's erasure, after which no event carries personal data.
The created event names the requester's CRM id (``requester_id``, the owner
id of ``requester_ticket``). The same seed gives the same history;
``history.deliver`` scrambles it; ``id_requests.py`` plans the CRM's ID
mutation requests for it.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Iterator
from typing import Any

from examples.support_desk.history import History
from examples.support_desk.schemas import PRIORITIES, SENTIMENTS
from examples.support_desk.truth import (
    Augment,
    CommentPosted,
    Effect,
    Erasure,
    RecordWrite,
    StatusChange,
    Truth,
)
from framework import Event

__all__ = ["generate_history", "requester_id", "START_MICROS", "SLA_HOURS", "REQUESTERS"]

#: Source time of the first ticket: 2024-06-01T00:00:00Z in microseconds.
START_MICROS = 1_717_200_000_000_000
SECOND = 1_000_000
HOUR = 3600 * SECOND
#: SLA of each priority: hours from creation to the due time.
SLA_HOURS = {"low": 72, "normal": 24, "high": 8, "urgent": 2}
_NAMES = ("Ana Silva", "Bo Lind", "Chen Wei", "Dara Okafor", "Eli Cohen", "Femi Ade", "Gus Berg", "Hana Mori")
_DOMAINS = ("example.com", "mail.example", "corp.example")
_SUBJECTS = (
    "Cannot log in",
    "Invoice is wrong",
    "Export times out",
    "Feature request: dark mode",
    "Refund please",
    "API returns 500",
    "How do I reset 2FA?",
    "Data missing after import",
)
_STAFF = ("sam", "kim", "lee", "ola", "raj")
#: Requester ids per tenant in the CRM (``requester_id``: a hash of the ticket, no random draw).
REQUESTERS = 40
_NEXT = {
    "open": ("pending", "solved"),
    "pending": ("open", "solved"),
    "reopened": ("pending", "solved"),
    "solved": ("reopened", "closed"),
}


def generate_history(
    seed: int, n_tickets: int, tenants: tuple[str, ...] = ("acme", "globex", "initech")
) -> History:
    """The events of ``n_tickets`` tickets in source (version) order, and their ground truth."""
    if n_tickets < 1 or not tenants:
        raise ValueError("generate_history: n_tickets and tenants must not be empty")
    rng = random.Random(seed)
    ids = (f"ev-{seed}-{n:07d}" for n in itertools.count())
    planned: list[_Planned] = []
    for n in range(n_tickets):
        ref = (rng.choice(tenants), rng.choice(("zendesk", "freshdesk")), f"{seed}-{n}")
        t0 = START_MICROS + rng.randrange(14 * 24 * HOUR)
        planned += _Life(rng, ids, ref, t0).plan()
    planned.sort(key=lambda p: (p[0].version, p[0].event_id))
    truth = Truth()
    for event, ref, effect in planned:
        truth.ticket(*ref).apply(effect, event.version, event.event_id)
    return History(seed, tuple(e for e, _, _ in planned), truth)


def requester_id(ref: tuple[str, str, str]) -> str:
    """The CRM's id of the requester of ticket ``ref``: one of ``REQUESTERS`` per tenant."""
    return f"person-{zlib.crc32('/'.join(ref).encode()) % REQUESTERS:02d}"


#: An event, the ticket it is about (tenant, source, external id) and its change in the source.
_Planned = tuple[Event, tuple[str, str, str], Effect]


class _Life:
    """Plans one ticket's events; every event gets a higher version than the one before."""

    def __init__(self, rng: random.Random, ids: Iterator[str], ref: tuple[str, str, str], t0: int) -> None:
        self.rng, self.ids, self.ref, self.t = rng, ids, ref, t0
        self.out: list[_Planned] = []
        self.status, self.seq, self.comments, self.erased = "open", 0, 0, False
        self.priority = "normal"
        self.created_at = t0

    def emit(self, type_: str, payload: dict[str, Any], effect: Effect, at: int | None = None) -> None:
        version, self.t = self.t, self.t + 1
        key = "/".join(self.ref)
        event = Event(next(self.ids), key, version, version if at is None else at, type_, payload)
        self.out.append((event, self.ref, effect))

    def later(self, lo: int, hi: int) -> None:
        self.t += self.rng.randrange(lo, hi)

    def plan(self) -> list[_Planned]:
        rng = self.rng
        if rng.random() < 0.3:  # scored from the inbound mail before the helpdesk filed it
            self.t -= rng.randrange(SECOND, 120 * SECOND)
            self.score()
            self.t = self.created_at
        self.create()
        steps = rng.randint(2, 9)
        erase_at = rng.randrange(steps + 1) if rng.random() < 0.3 else None
        for step in range(steps):
            if self.status == "closed":
                break
            self.later(SECOND, 6 * HOUR)
            if step == erase_at:
                self.erase()
            action = rng.choices(("update", "comment", "advance", "score"), (3, 3, 3, 1))[0]
            getattr(self, action)()
        if erase_at is not None and not self.erased:
            self.later(SECOND, 6 * HOUR)
            self.erase()
        return self.out

    def person(self) -> dict[str, str]:
        name = self.rng.choice(_NAMES)
        mail = f"{name.replace(' ', '.')}@{self.rng.choice(_DOMAINS)}"
        return {"requester_name": name, "requester_email": mail if self.rng.random() < 0.4 else mail.lower()}

    def create(self) -> None:
        tenant, source, external_id = self.ref
        fields: dict[str, Any] = {
            "subject": self.rng.choice(_SUBJECTS),
            **self.person(),
            "priority": self.rng.choice(PRIORITIES),
        }
        if self.rng.random() < 0.5:
            fields["assignee"] = self.rng.choice(_STAFF)
        identity = {"tenant": tenant, "source": source, "external_id": external_id}
        payload = {**identity, "requester_id": requester_id(self.ref), **fields}  # the id: not a record cell
        self.emit("ticket.created", payload, RecordWrite({**fields, "created_at": self.t}))
        self.priority = fields["priority"]
        self.change_status("open", "system", self.created_at)
        self.sla(self.priority)

    def update(self) -> None:
        kind = self.rng.choice(("priority", "assignee", "subject") + (() if self.erased else ("requester",)))
        if kind == "priority":
            fields: dict[str, Any] = {"priority": self.rng.choice(PRIORITIES)}
        elif kind == "assignee":
            fields = {"assignee": None if self.rng.random() < 0.3 else self.rng.choice(_STAFF)}
        elif kind == "subject":
            fields = {"subject": "Re: " + self.rng.choice(_SUBJECTS)}
        else:
            fields = self.person()
        tenant, source, external_id = self.ref
        identity = {"tenant": tenant, "source": source, "external_id": external_id}
        self.emit("ticket.updated", {**identity, **fields}, RecordWrite(fields))
        if kind == "priority":
            self.priority = fields["priority"]
            self.sla(self.priority)

    def sla(self, priority: str | None) -> None:
        self.later(SECOND, 30 * SECOND)
        due = None if priority is None else self.created_at + SLA_HOURS[priority] * HOUR
        self.emit("sla.computed", {"sla_due_at": due}, Augment({"sla_due_at": due}))

    def score(self) -> None:
        if self.rng.random() < 0.15:
            fields: dict[str, Any] = {"sentiment": None, "sentiment_score": None}  # withdrawn
        else:
            fields = {
                "sentiment": self.rng.choice(SENTIMENTS),
                "sentiment_score": round(self.rng.uniform(-1, 1), 3),
            }
        self.emit("sentiment.scored", fields, Augment(dict(fields)))

    def comment(self) -> None:
        self.comments += 1
        author = self.rng.choice(("agent", "requester"))
        body = f"{author} note {self.comments}: " + self.rng.choice(
            ("thanks", "any update?", "try again", "done")
        )
        tenant, source, external_id = self.ref
        payload = {
            "tenant": tenant,
            "source": source,
            "external_id": external_id,
            "comment_id": f"c{self.comments}",
            "author_kind": author,
            "body": body,
        }
        self.emit("comment.added", payload, CommentPosted(f"c{self.comments}", self.t, author, body))
        if author == "requester" and self.status == "solved":
            self.later(SECOND, 60 * SECOND)
            self.change_status("reopened", "requester", self.t)
            self.sla(self.priority)

    def advance(self) -> None:
        new = self.rng.choice(_NEXT[self.status])
        self.change_status(new, "agent", self.t)
        if new == "solved":
            if self.rng.random() < 0.3:  # closed on solve: the same instant, ordered by precedence
                self.change_status("closed", "system", self.t - 1)
            self.sla(None)
        elif new == "reopened":
            self.sla(self.priority)

    def change_status(self, status: str, by: str, at: int) -> None:
        self.seq += 1
        self.status = status
        payload = {"external_id": self.ref[2], "status": status, "changed_by": by}
        self.emit("ticket.status_changed", payload, StatusChange(status, at, by, self.seq), at=at)

    def erase(self) -> None:
        self.erased = True
        self.emit("requester.erased", {"request_id": f"dsr-{self.ref[2]}"}, Erasure())
