"""Strict payload validation: every bad field is named by a typed error."""

from __future__ import annotations

import math

import pytest

from agents.event_types import (
    SPECS,
    TOPIC_ACTIVITIES,
    TOPIC_ENGAGEMENT,
    TOPIC_INSIGHTS,
    PayloadError,
    topic_of,
    validate,
)
from agents.identity import ActivityRef, hub_id, ordering_key
from framework.core.events import EventError, parse_event
from tests.agents.builders import EMAIL, MEETING, REF, event


def test_every_type_has_one_of_the_three_topics() -> None:
    assert {s.topic for s in SPECS.values()} == {TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS}
    assert topic_of("meeting.cancelled") == TOPIC_ACTIVITIES
    with pytest.raises(EventError) as err:
        topic_of("meeting.exploded")
    assert err.value.field == "type"


def test_hub_key_is_natural_and_tenant_scoped() -> None:
    assert hub_id("o", "gcal", "x") == hub_id("o", "gcal", "x")
    assert len({hub_id("o", "gcal", "x"), hub_id("p", "gcal", "x"), hub_id("o", "outlook", "x")}) == 3
    assert REF.ordering_key == ordering_key("org-1", REF.hub_id) == f"org-1:{REF.hub_id}"


def test_valid_meeting_is_normalised() -> None:
    valid = validate(event("meeting.created", **MEETING), TOPIC_ACTIVITIES)
    assert valid.ref == REF
    assert valid.fields["participants"] == ("a@x.example", "b@x.example")
    assert "org_id" not in valid.fields


@pytest.mark.parametrize(
    ("type_", "fields", "bad"),
    [
        ("meeting.created", {k: v for k, v in MEETING.items() if k != "subject"}, "payload.subject"),
        ("meeting.created", {**MEETING, "starts_at": "9am"}, "payload.starts_at"),
        ("meeting.created", {**MEETING, "starts_at": True}, "payload.starts_at"),
        ("meeting.created", {**MEETING, "ends_at": -1}, "payload.ends_at"),
        ("meeting.created", {**MEETING, "ends_at": 5}, "payload.ends_at"),
        ("meeting.created", {**MEETING, "participants": []}, "payload.participants"),
        ("meeting.created", {**MEETING, "participants": "a@x.example"}, "payload.participants"),
        ("meeting.created", {**MEETING, "participants": ["a,b@x.example"]}, "payload.participants"),
        ("meeting.created", {**MEETING, "participants": [""]}, "payload.participants"),
        ("meeting.created", {**MEETING, "colour": "red"}, "payload.colour"),
        ("meeting.updated", {}, "payload.subject|body_preview|participants"),
        ("meeting.rescheduled", {"starts_at": 1}, "payload.ends_at"),
        ("email.created", {**EMAIL, "subject": None}, "payload.subject"),
        ("email.created", {**EMAIL, "subject": "x" * 999}, "payload.subject"),
        ("engagement.opened", {}, "payload.actor"),
        ("engagement.opened", {"actor": 7}, "payload.actor"),
        ("insight.computed", {}, "payload.sentiment|topic|next_step|score"),
        ("insight.computed", {"sentiment": "ecstatic"}, "payload.sentiment"),
        ("insight.computed", {"score": 1.5}, "payload.score"),
        ("insight.computed", {"score": math.nan}, "payload.score"),
        ("insight.computed", {"score": False}, "payload.score"),
        ("insight.computed", {"topic": ""}, "payload.topic"),
        ("sharing.changed", {"shared_with": None}, "payload.shared_with"),
    ],
)
def test_bad_payload_names_the_field(type_: str, fields: dict, bad: str) -> None:
    with pytest.raises(PayloadError) as err:
        validate(event(type_, **fields), topic_of(type_))
    assert err.value.field == bad
    assert isinstance(err.value, EventError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("name", ["org_id", "source", "external_id"])
def test_missing_or_empty_identity_is_named(name: str) -> None:
    e = event("meeting.cancelled")
    for broken in ({k: v for k, v in e.payload.items() if k != name}, {**e.payload, name: ""}):
        bad = parse_event({**e.to_dict(), "payload": broken})
        with pytest.raises(PayloadError) as err:
            validate(bad, TOPIC_ACTIVITIES)
        assert err.value.field == f"payload.{name}"


def test_wrong_topic_wrong_type_and_wrong_ordering_key() -> None:
    with pytest.raises(EventError) as err:
        validate(event("meeting.cancelled"), TOPIC_INSIGHTS)
    assert err.value.field == "type"
    with pytest.raises(EventError) as err:
        validate(event("meeting.cancelled", ordering_key="org-1:someone-else"), TOPIC_ACTIVITIES)
    assert err.value.field == "ordering_key"
    other = ActivityRef("org-2", "gcal", "evt-1")
    with pytest.raises(EventError) as err:
        validate(event("meeting.cancelled", ordering_key=other.ordering_key), TOPIC_ACTIVITIES)
    assert err.value.field == "ordering_key"


def test_nullable_insight_fields_and_empty_sharing_are_valid() -> None:
    valid = validate(event("insight.computed", next_step=None, score=1), TOPIC_INSIGHTS)
    assert valid.fields == {"next_step": None, "score": 1.0}
    assert validate(event("sharing.changed", shared_with=[]), TOPIC_INSIGHTS).fields == {"shared_with": ()}


def test_json_round_trip_validates() -> None:
    e = event("email.created", **EMAIL)
    assert validate(parse_event(e.to_json()), TOPIC_ACTIVITIES) == validate(e, TOPIC_ACTIVITIES)
