"""Revision counts of final windows (``framework.aggregates.totals``) over the SQLite store: the
toy app's two-day windows made final a day after they end, the Driver's clock moved by hand. A late
edit of a final window counts once; its replay, a duplicated announcement, an edit before the
window is final, a window's first totals and a stale announcement count nothing; a window emptied
after it was final keeps its count; an aggregate without ``final_after_s`` reads and writes none.
Both example apps' daily windows count a late event of their history once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history as activity_history
from examples.activity_platform.oracle import expected_totals as expected_activity
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from examples.support_desk.oracle import expected_totals as expected_desk
from framework import App, Event
from framework.aggregates.query import Queries
from framework.aggregates.tables import tables_of
from framework.aggregates.totals import TotalsProcessor, group_records
from framework.core.aggregate import Group, group_id
from framework.runtime.work import Work
from framework.testing.driver import Driver
from tests.agents.replay import in_order
from tests.aggregates.tasks import DAY, DueByTeam, DueFinal, TaskAgent, revising_app

#: The windows holding a due time of day 10 start on days 9 and 10; the later ends on day 12 and is
#: final from day 13, the earlier from day 12.
DUE = 10 * DAY
BEFORE_FINAL = 11 * DAY
AFTER_FINAL = 20 * DAY
RED_9, RED_10 = group_id(["red"], 9 * DAY), group_id(["red"], 10 * DAY)


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


def _driver(now: float) -> Driver:
    d = Driver(revising_app(), now=now)
    assert d.send([_set("t1", 10, team="red", status="open", points=3.0, due=DUE),
                   _set("t2", 20, team="red", status="open", points=5.0, due=DUE)]) == []  # fmt: skip
    assert d.totals("due_final")[RED_10] == {"tasks": 2, "least": 3.0}
    return d


def test_a_late_edit_of_a_final_window_counts_once_and_its_replay_nothing() -> None:
    with _driver(BEFORE_FINAL) as d:
        edit = _set("t1", 30, points=1.0)
        d.now = AFTER_FINAL
        assert d.send(edit) == []
        assert d.totals("due_final")[RED_10] == {"tasks": 2, "least": 1.0}
        assert d.revisions("due_final") == {RED_9: 1, RED_10: 1}
        assert d.send([edit, edit]) == []  # a replay and a duplicate of the edit
        assert d.send(_set("t2", 15, points=0.5)) == []  # an older version: the row keeps version 20
        assert d.revisions("due_final") == {RED_9: 1, RED_10: 1}
        q = Queries(d.store, d.app.views, clock=lambda: d.now)
        total = d.run(q.total("due_final", {"team": "red"}, 10 * DAY))
        assert (total.final, total.revisions, total.to_dict()["revisions"]) == (True, 1, 1)
        assert d.send(_set("t2", 40, points=0.5)) == []
        assert d.revisions("due_final") == {RED_9: 2, RED_10: 2}
        windows = d.run(q.windows("due_final", {"team": "red"}))
        assert [(w.window, w.revisions) for w in windows.windows] == [(9 * DAY, 2), (10 * DAY, 2)]
        assert d.revisions("due_by_team") == {}  # the same tasks, in an aggregate that never counts


def test_edits_before_the_window_is_final_count_nothing() -> None:
    with _driver(BEFORE_FINAL) as d:
        assert d.send([_set("t1", 30, points=1.0), _set("t3", 40, team="red", status="open", due=DUE)]) == []
        assert d.totals("due_final")[RED_10] == {"tasks": 3, "least": 0.0}
        # the day-9 window is final from day 12: an edit on day 12 revises it, not the day-10 one
        d.now = 12 * DAY
        assert d.send(_set("t3", 50, points=7.0)) == []
        assert d.revisions("due_final") == {RED_9: 1}
        rows = d.rows(tables_of(DueFinal()).totals.name)
        assert sorted(int(str(r.cells["revisions"].value)) for r in rows) == [0, 1]


def test_a_duplicated_announcement_counts_nothing_and_a_stale_one_is_ignored() -> None:
    with _driver(BEFORE_FINAL) as d:
        d.now = AFTER_FINAL
        agg = d.app.aggregate("due_final")
        totals = TotalsProcessor(agg, d.store, clock=lambda: d.now)
        records = group_records(agg, [(Group(("red",), 9 * DAY), 0), (Group(("red",), 10 * DAY), 0)], 1)
        assert len(records) == 1
        _, key, value = records[0]

        def announce(offset: int) -> None:
            work = Work((d.app.group_topic(agg), 0), offset, key, value)
            totals.prepare(work)
            d.run(totals(work))

        for offset in (10_000, 10_001, 10_001):  # announced again, twice at the same offset
            announce(offset)
        assert d.revisions("due_final") == {}
        assert d.send(_set("t1", 30, points=1.0)) == []  # the Driver's own offsets stay below 10_000
        assert d.revisions("due_final") == {}  # computed, but written below the stored version
        announce(10_002)  # the next announcement sees the change: one revision
        announce(10_003)
        assert d.revisions("due_final") == {RED_9: 1, RED_10: 1}


def test_a_windows_first_totals_after_it_is_final_count_nothing() -> None:
    with Driver(revising_app(), now=AFTER_FINAL) as d:  # every window is final from the start
        assert d.send(_set("t1", 10, team="red", status="open", points=3.0, due=DUE)) == []
        assert d.send(_set("t3", 30, team="blue", status="open", points=2.0, due=DUE)) == []
        assert {RED_10, group_id(["blue"], 10 * DAY)} <= set(d.totals("due_final"))
        assert d.revisions("due_final") == {}
        assert d.send(_set("t2", 40, team="red", status="open", points=5.0, due=DUE)) == []
        assert d.revisions("due_final") == {RED_9: 1, RED_10: 1}  # a second member revises


def test_a_window_emptied_after_it_was_final_keeps_its_count() -> None:
    with _driver(BEFORE_FINAL) as d:
        d.now = AFTER_FINAL
        assert d.send([_set("t1", 30, status="done"), _set("t2", 40, status="done")]) == []
        assert RED_10 not in d.totals("due_final") and RED_10 not in d.totals("due_by_team")
        assert d.revisions("due_final") == {RED_9: 2, RED_10: 2}
        q = Queries(d.store, d.app.views, clock=lambda: d.now)
        gone = d.run(q.total("due_final", {"team": "red"}, 10 * DAY))
        assert (gone.found, gone.members, gone.revisions) == (False, 0, 2)
        assert d.run(q.windows("due_final", {"team": "red"})).windows == []
        assert d.send(_set("t1", 50, status="open")) == []
        assert d.totals("due_final")[RED_10] == {"tasks": 1, "least": 3.0}
        assert d.revisions("due_final") == {RED_9: 3, RED_10: 3}


def test_an_aggregate_without_final_after_s_reads_no_totals_and_writes_no_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = App("tasks", agents=[TaskAgent()], aggregates=[DueByTeam()])
    with Driver(app, now=AFTER_FINAL) as d:
        read_rows = d.store.read_rows
        totals = tables_of(DueByTeam()).totals.name

        async def no_totals_read(table: str, keys: Any) -> Any:
            assert table != totals, "the totals were read"
            return await read_rows(table, keys)

        monkeypatch.setattr(d.store, "read_rows", no_totals_read)
        assert d.send([_set("t1", 10, team="red", status="open", points=3.0, due=DUE),
                       _set("t1", 20, points=1.0)]) == []  # fmt: skip
        rows = d.rows(totals)
        assert len(rows) == 2 and not any("revisions" in r.cells for r in rows)


def _activity_case() -> tuple[App, str, list[Event], Event, dict[str, dict[str, float]]]:
    """The activity platform's in-order pass; withheld: the only ``opened`` engagement of an email."""
    h = activity_history(2024, 300, n_orgs=2)
    events = in_order(h)
    opened = Counter(e.ordering_key for e in events if e.type == "engagement.opened")
    late = next(e for e in events if e.type == "engagement.opened" and opened[e.ordering_key] == 1)
    expected = expected_activity(h.truth, h.distinct())["engagement_daily"]
    return activity_app, "engagement_daily", events, late, expected


def _desk_case() -> tuple[App, str, list[Event], Event, dict[str, dict[str, float]]]:
    """The support desk's in-order pass; withheld: the first agent comment of a ticket with two."""
    h = desk_history(8, 60)
    agent = [e for e in h.events if e.type == "comment.added" and e.payload.get("author_kind") == "agent"]
    answers = Counter(e.ordering_key for e in agent)
    late = next(e for e in agent if answers[e.ordering_key] >= 2)
    return desk_app, "first_response", list(h.events), late, expected_desk(h.truth)["first_response"]


@pytest.mark.parametrize("case", [_activity_case, _desk_case], ids=["activity_platform", "support_desk"])
def test_the_example_apps_count_a_late_edit_of_a_final_day_once(case: Any) -> None:
    """Each app's history without one event, while no day is final (the Driver's clock before the
    data); then, every day final, the event arrives: each day whose totals it changes counts one
    revision (the model: the days whose totals differ before and after); then the whole history
    and the event again change nothing."""
    app, name, events, late, expected = case()
    assert app.aggregate(name).final_after_s == 2 * DAY
    with Driver(app) as d:
        assert d.now < min(e.version for e in events) / 1_000_000
        assert d.send([e for e in events if e.event_id != late.event_id]) == []
        before = d.totals(name)
        assert d.revisions(name) == {}
        d.now = max(e.version for e in events) / 1_000_000 + 30 * DAY
        assert d.send(late) == []
        after = d.totals(name)
        assert after == expected
        revised = {g for g in before if after.get(g) != before[g]}
        assert revised and d.revisions(name) == dict.fromkeys(revised, 1)
        assert d.send([*events, late]) == []
        assert d.totals(name) == expected and d.revisions(name) == dict.fromkeys(revised, 1)
