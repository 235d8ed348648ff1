"""The support desk's event types, their topics and strict payload validation.

A payload field that is missing, unknown or ill-typed raises ``PayloadError``
naming the event type and the field; the framework parks the event. A
``None`` value is accepted only where a field may be cleared (assignee, SLA,
sentiment): it writes a cell tombstone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from examples.support_desk.schemas import PRIORITIES, SENTIMENTS, STATUSES
from framework import BadMessage, Event

__all__ = [
    "TOPIC_TICKETS",
    "TOPIC_STATUS",
    "TOPIC_ENRICHMENT",
    "TOPIC_PRIVACY",
    "TOPIC_MAIL",
    "AUTHOR_KINDS",
    "CHANGED_BY",
    "PayloadError",
    "UnknownEventType",
    "Spec",
    "SPECS",
    "types_on",
    "payload",
]

TOPIC_TICKETS = "support.tickets"
TOPIC_STATUS = "support.status"
TOPIC_ENRICHMENT = "support.enrichment"
TOPIC_PRIVACY = "support.privacy"
#: The mail gateway's replies: they name only the conversation (the email thread) they belong to.
TOPIC_MAIL = "support.mail"

AUTHOR_KINDS: tuple[str, ...] = ("agent", "requester")
CHANGED_BY: tuple[str, ...] = ("agent", "requester", "system")

Check = Callable[[Any], Any]


class UnknownEventType(BadMessage):
    """The event's type is not one of its topic's."""


class PayloadError(BadMessage):
    """A payload does not fit its event type; ``field`` names the offending field."""

    def __init__(self, event_type: str, name: str, message: str) -> None:
        super().__init__(f"{event_type}: payload.{name}: {message}")
        self.field = name


def text(max_len: int, *, empty: bool = False) -> Check:
    def check(v: Any) -> str:
        if not isinstance(v, str):
            raise ValueError(f"must be a string, got {type(v).__name__}")
        if not v and not empty:
            raise ValueError("must not be empty")
        if len(v) > max_len:
            raise ValueError(f"longer than {max_len} characters")
        return v

    return check


def choice(*options: str) -> Check:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError(f"must be one of {list(options)}, got {v!r}")
        return v

    return check


def email(v: Any) -> str:
    address = text(320)(v)
    if address.count("@") != 1 or any(c.isspace() for c in address):
        raise ValueError(f"{address!r} is not an email address")
    return address.lower()


def micros(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"must be integer microseconds, got {type(v).__name__}")
    if not 0 <= v < 2**63:
        raise ValueError(f"out of range: {v}")
    return v


def score(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not -1 <= v <= 1:
        raise ValueError(f"must be a number in [-1, 1], got {v!r}")
    return float(v)


def nullable(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


_IDENTITY: dict[str, Check] = {"tenant": text(128), "source": text(64), "external_id": text(256)}
_RECORD: dict[str, Check] = {
    "subject": text(998, empty=True),
    "requester_email": email,
    "requester_name": text(256),
    "priority": choice(*PRIORITIES),
}


@dataclass(frozen=True)
class Spec:
    """One event type: its topic, required and optional fields."""

    topic: str
    required: Mapping[str, Check]
    optional: Mapping[str, Check] = field(default_factory=dict)
    #: At least one optional field must be present.
    any_optional: bool = False


SPECS: Mapping[str, Spec] = {
    "ticket.created": Spec(
        TOPIC_TICKETS,
        {**_IDENTITY, **_RECORD},
        {"assignee": nullable(text(128)), "conversation_id": text(128), "requester_id": text(128)},
    ),
    "ticket.updated": Spec(
        TOPIC_TICKETS,
        _IDENTITY,
        {**_RECORD, "assignee": nullable(text(128)), "conversation_id": text(128)},
        any_optional=True,
    ),
    "comment.added": Spec(
        TOPIC_TICKETS,
        {**_IDENTITY, "comment_id": text(128), "author_kind": choice(*AUTHOR_KINDS), "body": text(10_000)},
    ),
    "ticket.status_changed": Spec(
        TOPIC_STATUS,
        {"external_id": text(256), "status": choice(*STATUSES), "changed_by": choice(*CHANGED_BY)},
    ),
    "sla.computed": Spec(TOPIC_ENRICHMENT, {"sla_due_at": nullable(micros)}),
    "sentiment.scored": Spec(
        TOPIC_ENRICHMENT, {"sentiment": nullable(choice(*SENTIMENTS)), "sentiment_score": nullable(score)}
    ),
    "requester.erased": Spec(TOPIC_PRIVACY, {"request_id": text(128)}),
    "reply.received": Spec(
        TOPIC_MAIL,
        {
            "conversation_id": text(128),
            "message_id": text(128),
            "author_kind": choice(*AUTHOR_KINDS),
            "body": text(10_000),
        },
    ),  # fmt: skip
}


def types_on(topic: str) -> tuple[str, ...]:
    """The event types published on ``topic``."""
    return tuple(t for t, s in SPECS.items() if s.topic == topic)


def payload(event: Event, topic: str) -> dict[str, Any]:
    """The checked, normalised payload of ``event``, an event of ``topic``; PayloadError otherwise."""
    spec = SPECS.get(event.type)
    if spec is None or spec.topic != topic:
        known = list(types_on(topic))
        raise UnknownEventType(f"type: {event.type!r} is not an event type of {topic!r} (known: {known})")
    unknown = sorted(str(k) for k in event.payload if k not in spec.required and k not in spec.optional)
    if unknown:
        raise PayloadError(event.type, unknown[0], "unknown field")
    out: dict[str, Any] = {}
    for name, check in (*spec.required.items(), *spec.optional.items()):
        if name not in event.payload:
            if name in spec.required:
                raise PayloadError(event.type, name, "missing")
            continue
        try:
            out[name] = check(event.payload[name])
        except ValueError as exc:
            raise PayloadError(event.type, name, str(exc)) from None
    if spec.any_optional and not set(spec.optional) & set(event.payload):
        raise PayloadError(event.type, "|".join(spec.optional), "needs at least one of these fields")
    return out
