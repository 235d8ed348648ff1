"""Event types of the reference activity platform and their strict payload validation.

Every payload names its activity by ``org_id``, ``source`` and ``external_id``
(see ``agents.identity``); the event's ``ordering_key`` must be that
activity's, so all events of one hub row share a key and a partition on every
topic. Payloads are strict: a missing, unknown or ill-typed field raises
``PayloadError`` naming it (``payload.<field>``), which the runtime parks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.identity import ActivityRef
from framework.core.events import Event, EventError
from framework.core.mutations import MAX_VERSION

__all__ = [
    "TOPIC_ACTIVITIES",
    "TOPIC_ENGAGEMENT",
    "TOPIC_INSIGHTS",
    "ENGAGEMENT_STATES",
    "SENTIMENTS",
    "SPECS",
    "types_of",
    "EventSpec",
    "PayloadError",
    "Validated",
    "validate",
    "topic_of",
]

TOPIC_ACTIVITIES = "activity-events"
TOPIC_ENGAGEMENT = "engagement-events"
TOPIC_INSIGHTS = "insight-events"

#: Engagement states in precedence order (a later one wins a tie on ``at``).
ENGAGEMENT_STATES: tuple[str, ...] = ("sent", "opened", "clicked", "replied")
SENTIMENTS: tuple[str, ...] = ("negative", "neutral", "positive", "mixed")
MAX_ADDRESSES = 500


class PayloadError(EventError):
    """A payload field is missing, unknown or ill-typed; ``field`` is ``payload.<name>``."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"payload.{name}", message)


Check = Callable[[str, Any], Any]


def _text(max_len: int, *, allow_empty: bool = False) -> Check:
    def check(name: str, v: Any) -> str:
        if not isinstance(v, str):
            raise PayloadError(name, f"must be a string, got {type(v).__name__}")
        if not v and not allow_empty:
            raise PayloadError(name, "must not be empty")
        if len(v) > max_len:
            raise PayloadError(name, f"longer than {max_len} characters")
        return v

    return check


def _micros(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise PayloadError(name, f"must be integer microseconds, got {type(v).__name__}")
    if not 0 <= v <= MAX_VERSION:
        raise PayloadError(name, f"out of range: {v}")
    return v


_COMMA_OR_SPACE = re.compile(r"[,\s]")


def _address(name: str, v: Any) -> str:
    if not isinstance(v, str) or not v or len(v) > 320:
        raise PayloadError(name, "addresses must be non-empty strings of at most 320 characters")
    if _COMMA_OR_SPACE.search(v):  # \s is str.isspace in a str pattern
        raise PayloadError(name, f"address {v!r} contains a comma or whitespace")
    return v.lower()


def _addresses(min_n: int) -> Check:
    def check(name: str, v: Any) -> tuple[str, ...]:
        if not isinstance(v, list | tuple):
            raise PayloadError(name, f"must be a list of addresses, got {type(v).__name__}")
        if not min_n <= len(v) <= MAX_ADDRESSES:
            raise PayloadError(name, f"must hold {min_n} to {MAX_ADDRESSES} addresses, got {len(v)}")
        return tuple(sorted({_address(name, a) for a in v}))

    return check


def _choice(*options: str) -> Check:
    def check(name: str, v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise PayloadError(name, f"must be one of {list(options)}, got {v!r}")
        return v

    return check


def _unit_float(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise PayloadError(name, f"must be a number, got {type(v).__name__}")
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise PayloadError(name, f"must be in [0, 1], got {v!r}")
    return float(v)


def _nullable(check: Check) -> Check:
    """``None`` clears the cell (a cell tombstone); anything else goes through ``check``."""
    return lambda name, v: None if v is None else check(name, v)


_IDENTITY: dict[str, Check] = {"org_id": _text(128), "source": _text(64), "external_id": _text(256)}
_CONTENT: dict[str, Check] = {
    "subject": _text(998, allow_empty=True),
    "body_preview": _text(4000, allow_empty=True),
    "participants": _addresses(1),
}
_WHEN = {"starts_at": _micros, "ends_at": _micros}
#: The CRM record (a lead or a contact id) an activity is logged against, when the source knows it.
_OWNER: dict[str, Check] = {"owner_id": _text(128)}
_INSIGHT: dict[str, Check] = {
    "sentiment": _nullable(_choice(*SENTIMENTS)),
    "topic": _nullable(_text(128)),
    "next_step": _nullable(_text(512)),
    "score": _nullable(_unit_float),
}


@dataclass(frozen=True)
class EventSpec:
    """One event type: its topic, required and optional payload fields."""

    type: str
    topic: str
    required: Mapping[str, Check] = field(default_factory=dict)
    optional: Mapping[str, Check] = field(default_factory=dict)
    #: At least one optional field must be present.
    any_optional: bool = False


def _specs() -> dict[str, EventSpec]:
    a, e, i = TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS
    specs = [
        EventSpec("email.created", a, {**_IDENTITY, **_CONTENT, "sent_at": _micros}, _OWNER),
        EventSpec("email.updated", a, _IDENTITY, _CONTENT, any_optional=True),
        EventSpec("meeting.created", a, {**_IDENTITY, **_CONTENT, **_WHEN}, _OWNER),
        EventSpec("meeting.updated", a, _IDENTITY, _CONTENT, any_optional=True),
        EventSpec("meeting.rescheduled", a, {**_IDENTITY, **_WHEN}),
        EventSpec("meeting.cancelled", a, _IDENTITY),
        *(EventSpec(f"engagement.{s}", e, {**_IDENTITY, "actor": _address}) for s in ENGAGEMENT_STATES),
        EventSpec("insight.computed", i, _IDENTITY, _INSIGHT, any_optional=True),
        EventSpec("sharing.changed", i, {**_IDENTITY, "shared_with": _addresses(0)}),
    ]
    return {s.type: s for s in specs}


#: Every event type of the platform, by name.
SPECS: Mapping[str, EventSpec] = _specs()


def types_of(topic: str) -> tuple[str, ...]:
    """The event types published on ``topic``."""
    return tuple(t for t, spec in SPECS.items() if spec.topic == topic)


def topic_of(event_type: str) -> str:
    """The topic events of ``event_type`` are published on; EventError when unknown."""
    spec = SPECS.get(event_type)
    if spec is None:
        raise EventError("type", f"unknown event type {event_type!r}")
    return spec.topic


@dataclass(frozen=True, slots=True)
class Validated:
    """A validated event: its activity and its normalised non-identity fields."""

    ref: ActivityRef
    fields: Mapping[str, Any]


def validate(event: Event, topic: str) -> Validated:
    """Check ``event`` against its spec on ``topic``; raise EventError/PayloadError naming the field."""
    spec = SPECS.get(event.type)
    if spec is None or spec.topic != topic:
        raise EventError("type", f"{event.type!r} is not an event type of topic {topic!r}")
    payload = event.payload
    if not isinstance(payload, Mapping):
        raise EventError("payload", f"must be a mapping, got {type(payload).__name__}")
    unknown = sorted(str(k) for k in payload if k not in spec.required and k not in spec.optional)
    if unknown:
        raise PayloadError(unknown[0], f"unknown field for {spec.type}")
    out: dict[str, Any] = {}
    for name, check in spec.required.items():
        if name not in payload:
            raise PayloadError(name, "missing")
        out[name] = check(name, payload[name])
    for name, check in spec.optional.items():
        if name in payload:
            out[name] = check(name, payload[name])
    if spec.any_optional and not set(spec.optional) & set(payload):
        raise PayloadError("|".join(spec.optional), f"{spec.type} needs at least one of these fields")
    if "ends_at" in out and out["ends_at"] < out["starts_at"]:
        raise PayloadError("ends_at", "is before starts_at")
    ref = ActivityRef(out.pop("org_id"), out.pop("source"), out.pop("external_id"))
    if event.ordering_key != ref.ordering_key:
        raise EventError("ordering_key", f"must be {ref.ordering_key!r} for this activity")
    return Validated(ref, out)
