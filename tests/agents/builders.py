"""Hand-built events of the reference platform for unit tests (on the kit's ``make_event``)."""

from __future__ import annotations

from typing import Any

from agents.identity import ActivityRef
from framework.core.events import Event
from framework.testing import make_event

REF = ActivityRef("org-1", "gcal", "evt-1")
HUB = REF.hub_id


def event(
    type_: str,
    *,
    ref: ActivityRef = REF,
    event_id: str = "e-1",
    version: int = 2_000,
    occurred_at: int = 1_500,
    ordering_key: str | None = None,
    **fields: Any,
) -> Event:
    """An event about ``ref`` with ``fields`` added to its identity payload."""
    payload = {"org_id": ref.org_id, "source": ref.source, "external_id": ref.external_id, **fields}
    return make_event(
        type_,
        payload,
        key=ordering_key or ref.ordering_key,
        version=version,
        event_id=event_id,
        occurred_at=occurred_at,
    )


MEETING: dict[str, Any] = {
    "subject": "Renewal",
    "body_preview": "Agenda",
    "participants": ["b@x.example", "A@x.example", "a@x.example"],
    "starts_at": 10_000,
    "ends_at": 20_000,
}
EMAIL: dict[str, Any] = {
    "subject": "Hi",
    "body_preview": "",
    "participants": ["a@x.example", "c@y.example"],
    "sent_at": 5_000,
}
