"""Group totals reduced from buckets (``Aggregate.buckets``) over the SQLite store: the toy app's
aggregates over three buckets a group. A change recomputes its own bucket only and the total from
the buckets' rows; the totals equal those of the same history over one bucket; a bucket left empty
loses its row; an announcement without buckets recomputes every bucket; bad bucket lists are
parked with their error. Both example apps' bucketed aggregates are checked against their oracles
by their own properties (tests/agents/test_aggregates.py,
tests/examples/support_desk/test_aggregates.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from framework import Event
from framework.aggregates.tables import decode_measures, tables_of
from framework.aggregates.totals import TotalsProcessor, group_records, groups_named, recompute
from framework.core.aggregate import Group, group_id
from framework.core.events import EventError, parse_event
from framework.core.mutations import Delete
from framework.core.schema import SchemaError
from framework.runtime.work import Work
from framework.testing.driver import Driver
from tests.aggregates.tasks import ByTeamStatus, ByTeamStatusBuckets, bucketed_app, task_app

RED_OPEN = group_id(["red", "open"])
TASKS = [f"t{i}" for i in range(12)]


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


def _history() -> list[Event]:
    events = [_set(t, 10 + i, team="red", status="open", points=float(i)) for i, t in enumerate(TASKS)]
    return [*events, _set("t3", 40, status="done"), _set("t4", 41, points=20.0)]


def test_bucket_rows_reduce_to_the_same_totals_as_one_bucket() -> None:
    agg = ByTeamStatusBuckets()
    used = {agg.bucket_of(t) for t in TASKS}
    assert len(used) == 3  # the history spreads over every bucket
    with Driver(task_app()) as one, Driver(bucketed_app()) as three:
        assert one.send(_history()) == [] and three.send(_history()) == []
        assert three.totals("by_team_status") == one.totals("by_team_status")
        assert three.totals("by_team_status")[RED_OPEN] == {"tasks": 11, "points": 79.0, "top": 20.0}
        rows = three.rows(tables_of(agg).buckets.name)
        by_bucket = {int(str(r.key["bucket"])): decode_measures(r.cells["measures"].value) for r in rows
                     if r.key["series"] == json.dumps(["red", "open"], separators=(",", ":"))}  # fmt: skip
        assert set(by_bucket) == used
        assert sum(m["tasks"] for m in by_bucket.values()) == 11
        assert one.rows(tables_of(task_app().aggregate("by_team_status")).buckets.name) == []


def test_a_change_reads_its_own_bucket_and_the_bucket_rows_only() -> None:
    with Driver(bucketed_app()) as d:
        assert d.send(_history()) == []
        agg = d.app.aggregate("by_team_status")
        read: list[dict[str, Any]] = []
        store_read = d.store.read_partitions

        async def spy(table: str, keys: Any, *args: Any, **kwargs: Any) -> Any:
            if table == tables_of(agg).members.name:
                read.extend(keys)
            return await store_read(table, keys, *args, **kwargs)

        d.store.read_partitions = spy  # type: ignore[method-assign]
        assert d.send(_set("t5", 50, points=30.0)) == []
        assert read == [{"series": '["red","open"]', "window": 0, "bucket": agg.bucket_of("t5")}]
        assert d.totals("by_team_status")[RED_OPEN]["top"] == 30.0


def test_a_bucket_left_empty_loses_its_row_and_the_group_its_total() -> None:
    with Driver(bucketed_app()) as d:
        agg = d.app.aggregate("by_team_status")
        t = tables_of(agg)
        assert d.send([_set("t1", 10, team="red", status="open"), _set("t1", 20, status="done")]) == []
        assert RED_OPEN not in d.totals("by_team_status")
        assert [r for r in d.rows(t.buckets.name) if '"open"' in str(r.key["series"])] == []


def test_an_announcement_without_buckets_recomputes_every_bucket() -> None:
    with Driver(bucketed_app()) as d:
        assert d.send(_history()) == []
        agg = d.app.aggregate("by_team_status")
        before = d.totals("by_team_status")
        t = tables_of(agg)
        red_open = [r for r in d.rows(t.buckets.name) if r.key["series"] == '["red","open"]']
        assert len(red_open) == 3
        d.run(d.store.apply([Delete(t.buckets.name, dict(r.key), 5_000) for r in red_open]))
        g = Group(("red", "open"))
        d.run(recompute(d.store, agg, {g: 10_000}))  # no buckets named: all three
        assert d.totals("by_team_status") == before
        assert len([r for r in d.rows(t.buckets.name) if r.key["series"] == '["red","open"]']) == 3


@pytest.mark.parametrize(
    "buckets, error",
    [
        ([[0]], "one non-empty list of buckets below 3 per group"),  # two groups, one list
        ([[0], []], "one non-empty list"),
        ([[0], [3]], "below 3"),
        ([[0], ["1"]], "below 3"),
        ({"a": 1}, "one non-empty list"),
    ],
)
def test_bad_bucket_lists_are_an_event_error(buckets: Any, error: str) -> None:
    agg = ByTeamStatusBuckets()
    groups = [Group(("red", "open")), Group(("blue", "open"))]
    ((_, _, value),) = group_records(agg, [(groups[0], 0), (groups[1], 2)], 1)
    event = parse_event(value)
    assert groups_named(event, agg) == [(groups[0], [0]), (groups[1], [2])]
    bad = Event(event.event_id, event.ordering_key, 0, 0, event.type, {**event.payload, "buckets": buckets})
    with pytest.raises(EventError, match=error):
        groups_named(bad, agg)


def test_a_bad_bucket_list_is_a_message_error_for_the_runtime_to_park() -> None:
    with Driver(bucketed_app()) as d:
        agg = d.app.aggregate("by_team_status")
        totals = TotalsProcessor(agg, d.store)
        good = group_records(agg, [(Group(("red", "open")), 1)], 1)[0][2]
        bad = Event("bad", "by_team_status/0", 0, 0, "groups_changed",
                    {"aggregate": agg.name, "groups": [RED_OPEN], "buckets": [[7]]}).to_json()  # fmt: skip
        key = b"by_team_status/0"
        works = [Work((d.app.group_topic(agg), 0), i, key, v) for i, v in enumerate([bad, good])]
        for w in works:
            totals.prepare(w)
        items, errors = totals.map_batch(works)
        assert [w.offset for w, _ in items] == [1] and [w.offset for w, _ in errors] == [0]
        assert "below 3" in str(errors[0][1])


@pytest.mark.parametrize("buckets", [0, -2, 1.5, True, "4"])
def test_buckets_must_be_a_positive_int(buckets: Any) -> None:
    with pytest.raises(SchemaError, match="an int of at least 1"):
        type("Bad", (ByTeamStatus,), {"buckets": buckets})
