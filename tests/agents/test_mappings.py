"""Each event type's mutations, and the agents' declared tables and topics."""

from __future__ import annotations

import pytest

from agents import REFERENCE_AGENTS, ActivitiesAgent, EngagementAgent, InsightsAgent, reference_agents
from agents.event_types import SPECS, PayloadError
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from framework.core.events import EventError
from framework.core.mutations import Delete, LogState, Upsert
from tests.agents.builders import EMAIL, HUB, MEETING, REF, event
from tests.agents.replay import app

IDENTITY = {"org_id": "org-1", "source": "gcal", "external_id": "evt-1"}


def test_agents_cover_every_event_type_once() -> None:
    topics = [cls.topic for cls in REFERENCE_AGENTS]
    assert len(set(topics)) == len(topics) == 3
    assert {s.topic for s in SPECS.values()} == set(topics)
    assert [a.name for a in reference_agents()] == ["activities", "engagement", "insights"]
    views = {  # every agent writes a source table of the activity projection and of engagement_daily
        "activities": ["activities", "owner_daily", "engagement_daily"],  # and owner_activity
        "engagement": ["activities", "engagement_daily"],
        "insights": ["activities", "engagement_daily"],
    }
    for agent in app.agents:
        assert [p.name for p in app.views_of(agent)] == views[agent.name]
        assert set(agent.event_types) == {t for t, s in SPECS.items() if s.topic == agent.topic}


def test_meeting_created_upserts_the_whole_record() -> None:
    [m] = ActivitiesAgent().handle(event("meeting.created", version=7, **MEETING))
    assert isinstance(m, Upsert)
    assert m == Upsert(
        "activity_hub",
        {"hub_id": HUB},
        {
            **IDENTITY,
            "kind": "meeting",
            "subject": "Renewal",
            "body_preview": "Agenda",
            "participants": "a@x.example,b@x.example",
            "starts_at": 10_000,
            "ends_at": 20_000,
            "status": "scheduled",
        },
        7,
    )
    ACTIVITY_HUB.check_cells(m.cells)


def test_email_created_uses_sent_at_as_starts_at() -> None:
    [m] = ActivitiesAgent().handle(event("email.created", **EMAIL))
    assert isinstance(m, Upsert)
    assert m.cells["kind"] == "email" and m.cells["status"] == "sent"
    assert m.cells["starts_at"] == 5_000 and "ends_at" not in m.cells and "sent_at" not in m.cells
    assert m.cells["body_preview"] == ""


def test_updates_write_only_the_changed_fields() -> None:
    [m] = ActivitiesAgent().handle(event("meeting.updated", version=9, subject="New"))
    assert isinstance(m, Upsert)
    assert dict(m.cells) == {**IDENTITY, "kind": "meeting", "subject": "New"}
    [m] = ActivitiesAgent().handle(event("email.updated", participants=["Z@y.example"]))
    assert isinstance(m, Upsert)
    assert dict(m.cells) == {**IDENTITY, "kind": "email", "participants": "z@y.example"}


def test_rescheduled_moves_the_slot_and_marks_status() -> None:
    [m] = ActivitiesAgent().handle(event("meeting.rescheduled", starts_at=30, ends_at=40))
    assert isinstance(m, Upsert)
    assert dict(m.cells) == {
        **IDENTITY,
        "kind": "meeting",
        "starts_at": 30,
        "ends_at": 40,
        "status": "rescheduled",
    }


def test_cancelled_is_a_versioned_row_delete() -> None:
    assert list(ActivitiesAgent().handle(event("meeting.cancelled", version=11))) == [
        Delete("activity_hub", {"hub_id": HUB}, 11)
    ]


@pytest.mark.parametrize("state", ["sent", "opened", "clicked", "replied"])
def test_engagement_appends_a_log_state(state: str) -> None:
    e = event(f"engagement.{state}", event_id="ev-9", version=600, occurred_at=500, actor="Ann@y.example")
    [m] = EngagementAgent().handle(e)
    assert m == LogState(
        "engagement_log", {"hub_id": HUB}, state, 500, "ev-9", 600, {"actor": "ann@y.example"}
    )
    up = m.as_upsert()
    ENGAGEMENT_LOG.check_key(up.key)
    ENGAGEMENT_LOG.check_cells(up.cells)


def test_insight_upserts_augmented_cells_and_clears_with_none() -> None:
    e = event("insight.computed", version=3, sentiment="positive", next_step=None, score=0.25)
    [m] = InsightsAgent().handle(e)
    assert isinstance(m, Upsert)
    assert m == Upsert(
        "activity_hub",
        {"hub_id": HUB},
        {**IDENTITY, "sentiment": "positive", "next_step": None, "score": 0.25},
        3,
    )
    assert "kind" not in m.cells  # an insight never fakes the main record


def test_sharing_joins_addresses_and_empty_clears() -> None:
    [m] = InsightsAgent().handle(event("sharing.changed", shared_with=["b@x.example", "A@x.example"]))
    assert isinstance(m, Upsert)
    assert m.cells["shared_with"] == "a@x.example,b@x.example"
    [m] = InsightsAgent().handle(event("sharing.changed", shared_with=[]))
    assert isinstance(m, Upsert)
    assert m.cells["shared_with"] is None


def test_agents_reject_other_topics_events() -> None:
    with pytest.raises(EventError) as err:
        list(InsightsAgent().handle(event("meeting.cancelled")))
    assert err.value.field == "type"
    with pytest.raises(PayloadError):
        list(EngagementAgent().handle(event("engagement.opened")))


def test_the_ref_is_the_only_key_input() -> None:
    a = list(ActivitiesAgent().handle(event("meeting.cancelled", version=5)))
    b = list(InsightsAgent().handle(event("insight.computed", version=6, topic="x")))
    c = list(EngagementAgent().handle(event("engagement.sent", actor="a@x.example")))
    assert a[0].key == b[0].key == c[0].key == {"hub_id": REF.hub_id}
