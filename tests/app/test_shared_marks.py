"""Views over the same source tables sharing one version table (``Projection.marks_from``).

Each example app is run with a view that shares another's marks: its documents or totals
still equal the app's oracle (written from the history's ground truth, not from the code under
test) for shuffled, duplicated and replayed deliveries, and the shared version table holds one
mark per partition while the sharing view writes no table of its own.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any, ClassVar

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
from framework import App, Event
from framework.core.projection import Projection, mark_writers
from framework.core.rows import Row
from framework.core.schema import SchemaError
from framework.runtime.change_feed import CHANGES_TYPE, ChangeFeedSink, ChangeRecord
from framework.runtime.errors import SinkFailure
from framework.runtime.mapping import map_event
from framework.runtime.processor import AgentProcessor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.sinks import WideColumnSink
from framework.runtime.work import Work
from framework.testing import Driver, deliveries
from framework.testing.index import MemoryIndex
from stores.base import BulkResult, IndexOp
from stores.errors import TransientStoreError
from stores.sqlite import SqliteStore


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


# -- a view sharing marks is announced and projected with the view it shares them with ----------


class _CountingStore(SqliteStore):
    """The real SQLite store (in memory), counting the partitions read from each table."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.reads: collections.Counter[str] = collections.Counter()

    async def read_partitions(self, table: str, partition_keys: Sequence[Any]) -> list[list[Row]]:
        self.reads[table] += len(partition_keys)
        return await super().read_partitions(table, partition_keys)


class _FailingOnce(MemoryIndex):
    """The kit's in-memory index (no Elasticsearch here); its first bulk request fails."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        if not self.failed:
            self.failed = True
            raise TransientStoreError("injected: the mirror's index is unavailable")
        return await super().bulk(alias, ops)


def _desk_changes(store: SqliteStore) -> dict[str, list[Work]]:
    """The support desk history written to ``store`` by the agents' batch path, and the change
    records its feed announced, by topic (one partition each)."""
    announced: dict[str, list[Work]] = collections.defaultdict(list)

    async def publish(topic: str, records: Sequence[ChangeRecord]) -> None:
        for _, key, value in records:
            announced[topic].append(Work((topic, 0), len(announced[topic]), key, value))

    async def write() -> None:
        for schema in DESK.tables:
            await store.ensure_table(schema)
        for agent in DESK.agents:
            feeds = DESK.change_feeds(agent)
            sinks = [WideColumnSink(store), ChangeFeedSink(publish, feeds, dict.fromkeys(feeds, 1))]
            processor = AgentProcessor(agent, sinks, 5.0, DESK.views_of(agent))
            events = [e for e in DESK_HISTORY.events if DESK.route(e) is agent]
            works = [Work(("in", 0), i, e.ordering_key.encode(), e.to_json()) for i, e in enumerate(events)]
            items, bad = processor.map_batch(works)
            assert not bad
            await processor.write_batch(items)

    asyncio.run(write())
    return announced


def test_a_sharing_views_changes_are_announced_and_read_once_for_both_views() -> None:
    tickets, mirror = DESK.views
    assert set(DESK.change_feeds(DESK.agents[0])) == {DESK.change_topic(tickets)}
    assert DESK.sharing_marks(tickets) == (mirror,) and DESK.sharing_marks(mirror) == ()
    assert DESK.change_topic(mirror) in DESK.topics()  # records a worker of an earlier version sent
    store = _CountingStore()
    announced = _desk_changes(store)
    assert list(announced) == [DESK.change_topic(tickets)] and announced[DESK.change_topic(tickets)]
    index = MemoryIndex()
    processor = ProjectionProcessor(tickets, store, index, shared=[(mirror, index)])
    store.reads.clear()

    async def project() -> None:
        for alias, mappings in ((tickets.alias, tickets.mappings), (mirror.alias, mirror.mappings)):
            await index.ensure_index(alias, mappings)
        items, bad = processor.map_batch(announced[DESK.change_topic(tickets)])
        assert not bad
        await processor.write_batch(items)

    asyncio.run(project())
    expected = expected_state(DESK_HISTORY.truth).documents
    for view in (tickets, mirror):
        assert not compare_documents(expected, _documents(index, view)), view.name
    assert store.reads == {t.name: len(expected) for t in tickets.tables}  # one read for both views
    asyncio.run(store.close())


def test_a_failed_write_of_the_sharing_view_retries_the_record_and_converges() -> None:
    tickets, mirror = DESK.views
    store = _SqliteMemory()
    works = _desk_changes(store)[DESK.change_topic(tickets)]
    index, mirrored = MemoryIndex(), _FailingOnce()
    processor = ProjectionProcessor(tickets, store, index, shared=[(mirror, mirrored)])

    async def project() -> None:
        await index.ensure_index(tickets.alias, tickets.mappings)
        await mirrored.ensure_index(mirror.alias, mirror.mappings)
        for work in works:
            processor.prepare(work)  # as the runtime does: the records are in the topic
        items, _ = processor.map_batch(works)
        with pytest.raises(SinkFailure, match="mirror's index is unavailable"):
            await processor.write_batch(items)
        assert not await mirrored.search(mirror.alias)
        await processor.write_batch(items)  # the runtime's retry of the same records

    asyncio.run(project())
    expected = expected_state(DESK_HISTORY.truth).documents
    assert not compare_documents(expected, _documents(index, tickets))
    assert not compare_documents(expected, _documents(mirrored, mirror))
    assert processor.written.skipped == len(expected)  # the tickets were not sent again
    asyncio.run(store.close())


def test_a_record_on_the_sharing_views_own_topic_is_still_projected() -> None:
    """Records a worker of an earlier version announced on the sharing view's topic."""
    tickets, mirror = DESK.views
    store = _SqliteMemory()
    _desk_changes(store)
    keys = [{"ticket_id": k} for k in sorted(expected_state(DESK_HISTORY.truth).documents)]
    event = Event("old", "tickets_mirror/0", 1, 1, CHANGES_TYPE, {
        "projection": mirror.name, "changes": [{"key": k, "version": 1} for k in keys]})  # fmt: skip
    index = MemoryIndex()
    processor = ProjectionProcessor(mirror, store, index)

    async def project() -> None:
        await index.ensure_index(mirror.alias, mirror.mappings)
        await processor(Work((DESK.change_topic(mirror), 0), 0, b"tickets_mirror/0", event.to_json()))

    asyncio.run(project())
    assert not compare_documents(expected_state(DESK_HISTORY.truth).documents, _documents(index, mirror))
    asyncio.run(store.close())


def test_the_activity_platform_announces_engagement_changes_on_the_activities_topic() -> None:
    history = activity_history(7, 120, n_orgs=2)
    with Driver(activity_app) as d:
        assert d.send(history.events) == []
        announced = dict(d.announced)
        totals = d.totals("engagement_daily")
    assert announced[activity_app.change_topic(ActivityProjection())] > 0
    assert activity_app.change_topic(EngagementDaily()) not in announced
    expected = expected_totals(history.truth, history.distinct())["engagement_daily"]
    assert len(expected) > 3 and totals == expected


def _SqliteMemory() -> SqliteStore:  # noqa: N802 - reads as the store it returns
    return SqliteStore(":memory:")


def _documents(index: MemoryIndex, view: Projection) -> dict[str, tuple[dict[str, Any], int]]:
    """The documents ``index`` holds in ``view``'s alias, with their versions."""

    async def read() -> dict[str, tuple[dict[str, Any], int]]:
        await index.refresh(view.alias)
        return {h.doc_id: (dict(h.source), int(h.version or 0)) async for h in index.scan(view.alias)}

    return asyncio.run(read())
