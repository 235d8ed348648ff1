"""Views over the same source tables sharing one version table (``Projection.marks_from``).

Each example app is run with a view that shares another's marks: its documents or totals
still equal the app's oracle (written from the history's ground truth, not from the code under
test) for shuffled, duplicated and replayed deliveries, and the shared version table holds one
mark per partition while the sharing view writes no table of its own.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings

from agents import ActivityProjection, reference_agents
from examples.activity_platform.aggregates import AGGREGATES, EngagementDaily
from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history as activity_history
from examples.activity_platform.oracle import expected_totals
from examples.support_desk.agents import support_agents
from examples.support_desk.generator import generate_history as desk_history
from examples.support_desk.oracle import compare_documents, expected_state
from examples.support_desk.projection import TicketProjection
from framework import App
from framework.core.projection import mark_writers
from framework.core.schema import SchemaError
from framework.runtime.mapping import map_event
from framework.testing import Driver, deliveries


class TicketMirror(TicketProjection):
    """The support desk's ticket documents again, in another alias, on the ``tickets`` marks."""

    name: ClassVar[str] = "tickets_mirror"
    alias: ClassVar[str] = "tickets-mirror"
    marks_from: ClassVar[str | None] = "tickets"


DESK = App("support-desk-mirrored", agents=support_agents(), projections=[TicketProjection(), TicketMirror()])
DESK_HISTORY = desk_history(11, 40)


def test_a_sharing_view_names_the_version_table_of_the_view_it_shares() -> None:
    mirror, tickets = TicketMirror(), TicketProjection()
    assert mirror.version_table == tickets.version_table
    assert mirror.version_table.name == "tickets_version"
    assert mark_writers([tickets, mirror]) == [tickets]
    assert mark_writers([mirror, tickets]) == [mirror]


def test_a_mapped_event_marks_a_shared_version_table_once() -> None:
    event = DESK_HISTORY.events[0]
    agent = DESK.route(event)
    mutations = map_event(agent, event, DESK.views_of(agent))
    marks = [m for m in mutations if m.table.endswith("_version")]
    assert [m.table for m in marks] == ["tickets_version"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delivery=deliveries(DESK_HISTORY.events))
def test_the_support_desk_with_a_mirrored_projection_ends_in_the_oracles_documents(delivery: list) -> None:
    expected = expected_state(DESK_HISTORY.truth).documents
    with Driver(DESK) as d:
        assert d.send(delivery) == []
        found = {name: d.documents(name) for name in ("tickets", "tickets_mirror")}
        marks = d.rows("tickets_version")
        tables = d.run(d.store.tables())
    assert len(expected) == 40
    for name, documents in found.items():
        assert not compare_documents(expected, documents), name
    assert len(marks) == len(expected)
    assert "tickets_version" in tables and "tickets_mirror_version" not in tables


def test_the_activity_platforms_engagement_totals_read_the_activities_marks() -> None:
    assert EngagementDaily.marks_from == "activities"
    history = activity_history(2026, 400, n_orgs=3)
    with Driver(activity_app) as d:
        assert d.send(history.events) == []
        totals = d.totals("engagement_daily")
        marks = d.rows("activities_version")
        tables = d.run(d.store.tables())
        documents = d.documents("activities")
    expected = expected_totals(history.truth, history.distinct())["engagement_daily"]
    assert len(expected) > 10 and totals == expected
    assert "engagement_daily_version" not in tables and len(marks) >= len(documents) > 0


class _OtherTables(EngagementDaily):
    name: ClassVar[str] = "owner_mirror"
    marks_from: ClassVar[str | None] = "owner_daily"


class _Chained(EngagementDaily):
    name: ClassVar[str] = "chained"
    marks_from: ClassVar[str | None] = "engagement_daily"


class _Nowhere(EngagementDaily):
    name: ClassVar[str] = "nowhere"
    marks_from: ClassVar[str | None] = "no_such_view"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (_OtherTables(), "reads ['owner_activity'], not ['activity_hub', 'engagement_log']"),
        (_Chained(), "shares marks itself (marks_from = 'activities')"),
        (_Nowhere(), "names no other projection or aggregate"),
    ],
)
def test_an_app_refuses_marks_shared_with_a_view_of_other_tables_a_sharer_or_none(
    extra: EngagementDaily, says: str
) -> None:
    with pytest.raises(SchemaError, match="marks_from") as caught:
        App(
            "refused",
            agents=reference_agents(),
            projections=[ActivityProjection()],
            aggregates=[*AGGREGATES, extra],
        )
    assert says in str(caught.value)
