"""Interactive queries (``framework.aggregates.query``) over the Driver's SQLite store: a group's
totals, window ranges, top N, the final flag under an injected clock, bad input, and one entity
of the toy app and of both example apps (rows, state-log states, version marks)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from examples.support_desk.schemas import STATUSES
from framework import App, Event
from framework.aggregates.query import Queries, QueryError, parse_group, parse_key, split_pair
from framework.testing.driver import Driver
from tests.aggregates.tasks import DAY, DueFinal, TaskAgent, task_app


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


TASKS = [
    _set("t1", 10, team="red", status="open", points=3.0, due=10 * DAY),
    _set("t2", 20, team="red", status="open", points=5.0, due=10 * DAY),
    _set("t3", 30, team="blue", status="open", points=9.0, due=12 * DAY),
    _set("t4", 40, team="blue", status="done", points=1.0, due=12 * DAY),
    _set("t5", 50, team="green", status="open", points=2.0, due=10 * DAY + 5),
]


def test_a_groups_totals_carry_the_version_they_reflect() -> None:
    with Driver(task_app()) as d:
        d.send(TASKS)
        q = Queries(d.store, d.app.views)
        red = d.run(q.total("by_team_status", {"status": "open", "team": "red"}))
        assert red.found and red.measures == {"tasks": 2, "points": 8.0, "top": 5.0}
        assert (red.members, red.reflects, red.window, red.final) == (2, 20, None, None)
        assert red.group == {"team": "red", "status": "open"}  # in group_by order
        d.send(_set("t1", 60, status="hold"))
        red = d.run(q.total("by_team_status", {"team": "red", "status": "open"}))
        assert (red.measures, red.members, red.reflects) == ({"tasks": 1, "points": 5.0, "top": 5.0}, 1, 20)
        hold = d.run(q.total("by_team_status", {"team": "red", "status": "hold"}))
        assert hold.reflects == 60 and hold.members == 1
        none = d.run(q.total("by_team_status", {"team": "pink", "status": "open"}))
        assert not none.found and none.measures == {"tasks": 0, "points": 0} and none.reflects == 0
        assert json.loads(json.dumps(red.to_dict()))["measures"]["points"] == 5.0


def test_windows_in_a_range_and_final_by_the_injected_clock() -> None:
    app = App("tasks", agents=[TaskAgent()], aggregates=[DueFinal()])
    with Driver(app) as d:
        d.send(TASKS)
        now = [12 * DAY]
        q = Queries(d.store, app.views, clock=lambda: now[0])
        every = d.run(q.windows("due_final", {"team": "red"}))
        assert [(w.window, w.window_end, w.measures["tasks"]) for w in every.windows] == [
            (9 * DAY, 11 * DAY, 2), (10 * DAY, 12 * DAY, 2)]  # fmt: skip
        # ends at 11d, final a day later (12d <= now); the other ends at 12d: final at 13d
        assert [w.final for w in every.windows] == [True, False]
        assert every.reflects == 20
        one = d.run(q.windows("due_final", {"team": "red"}, since=9 * DAY + 1, until=11 * DAY))
        assert [w.window for w in one.windows] == [10 * DAY]
        first = d.run(q.windows("due_final", {"team": "red"}, since=9 * DAY, until=10 * DAY))
        assert [w.window for w in first.windows] == [9 * DAY]
        assert d.run(q.windows("due_final", {"team": "red"}, since=11 * DAY)).windows == []
        now[0] = 13 * DAY
        total = d.run(q.total("due_final", {"team": "red"}, window=10 * DAY))
        assert total.final is True and total.measures == {"tasks": 2, "least": 3.0}
        empty = d.run(q.total("due_final", {"team": "red"}, window=2 * DAY))
        assert not empty.found and empty.final is True and empty.window_end == 4 * DAY
        assert d.run(q.total("due_final", {"team": "red"}, window=30 * DAY)).final is False
        with pytest.raises(QueryError, match="not a window start .* start at \\[777600, 864000\\]"):
            d.run(q.total("due_final", {"team": "red"}, window=11 * DAY - 5))
        with pytest.raises(QueryError, match="is windowed"):
            d.run(q.total("due_final", {"team": "red"}))


def test_never_final_without_final_after_s() -> None:
    with Driver(task_app()) as d:
        d.send(TASKS)
        q = Queries(d.store, d.app.views, clock=lambda: 1e12)
        windows = d.run(q.windows("due_by_team", {"team": "blue"})).windows
        assert windows and all(w.final is False for w in windows)


def test_top_groups_by_a_measure_in_one_window_or_all() -> None:
    with Driver(task_app()) as d:
        d.send(TASKS)
        q = Queries(d.store, d.app.views)
        top = d.run(q.top("by_team_status", "points", limit=2))
        assert [(g.group, g.measures["points"]) for g in top.groups] == [
            ({"team": "blue", "status": "open"}, 9.0), ({"team": "red", "status": "open"}, 8.0)]  # fmt: skip
        assert top.scanned == 4 and top.reflects == 30
        tied = d.run(q.top("by_team_status", "tasks", limit=10))
        assert [g.measures["tasks"] for g in tied.groups] == [2, 1, 1, 1]
        assert [g.group["team"] for g in tied.groups[1:]] == ["blue", "blue", "green"]  # ties: group order
        day10 = d.run(q.top("due_by_team", "tasks", limit=5, window=10 * DAY))
        assert {g.group["team"]: g.measures["tasks"] for g in day10.groups} == {"red": 2, "green": 1}
        assert day10.scanned == 6 and all(g.window == 10 * DAY for g in day10.groups)
        assert d.run(q.top("due_by_team", "tasks", limit=1)).groups[0].group == {"team": "red"}


def test_bad_input_is_a_one_line_query_error() -> None:
    with Driver(task_app()) as d:
        q = Queries(d.store, d.app.views)
        cases = [
            (q.total("nope", {}), "no aggregate 'nope'"),
            (q.total("by_team_status", {"team": "red"}), "grouped by \\['team', 'status'\\]"),
            (q.total("by_team_status", {"team": "red", "status": "x"}, window=0), "has no window"),
            (q.windows("by_team_status", {"team": "red", "status": "x"}), "has no window"),
            (q.windows("due_by_team", {"team": "red"}, since=5, until=1), "before since"),
            (q.top("by_team_status", "nope"), "no measure 'nope'"),
            (q.top("by_team_status", "tasks", limit=0), "at least 1"),
            (q.entity("nope", {}), "no source table"),
            (q.entity("task", {"id": "x"}), "expected key columns"),
            (q.entity("task", {"task_id": "x"}, {"nope": ["a"]}), "not source tables"),
        ]
        for coro, message in cases:
            with pytest.raises(QueryError, match=message) as info:
                d.run(coro)
            assert "\n" not in str(info.value)
    with pytest.raises(QueryError, match="expected NAME=VALUE"):
        split_pair("team", "--group")
    assert parse_group([split_pair("team=a=b", "g"), split_pair("n:=3", "g")]) == {"team": "a=b", "n": 3}
    with pytest.raises(QueryError, match="not JSON"):
        parse_group([("n:", "x")])
    with pytest.raises(QueryError, match="given twice"):
        parse_group([("n", "1"), ("n", "2")])
    schema = desk_app.projection("tickets").tables[0]
    assert parse_key(schema, [("ticket_id", "7")]) == {"ticket_id": "7"}
    with pytest.raises(QueryError, match="missing \\['ticket_id'\\]"):
        parse_key(schema, [])
    with pytest.raises(QueryError, match="not a partition key column"):
        parse_key(schema, [("tenant", "x")])


def test_an_entity_of_the_toy_app_has_its_rows_and_the_marks_of_its_aggregates() -> None:
    with Driver(task_app()) as d:
        d.send([*TASKS, _set("t1", 70, points=4.0)])
        e = d.run(Queries(d.store, d.app.views).entity("task", {"task_id": "t1"}))
        [row] = e.rows["task"]
        assert row.cells == {"team": "red", "status": "open", "points": 4.0, "due": 10 * DAY}
        assert row.version == 70 and e.reflects == 70 and e.states == {}
        assert e.marks == {"by_team_status": 70, "due_by_team": 70}
        gone = d.run(Queries(d.store, d.app.views).entity("task", {"task_id": "zz"}))
        assert not gone.found and gone.reflects == 0 and gone.to_dict()["found"] is False


def test_a_support_desk_ticket_its_rows_and_current_status() -> None:
    history = desk_history(5, 6)
    with Driver(desk_app) as d:
        d.send(history.events)
        assert not d.parked
        q = Queries(d.store, desk_app.views)
        tickets = [str(r.key["ticket_id"]) for r in d.rows("ticket")]
        assert len(tickets) >= 5
        checked = 0
        for ticket in tickets:
            e = d.run(q.entity("ticket_status_log", {"ticket_id": ticket}, {"ticket_status_log": STATUSES}))
            assert set(e.rows) == {"ticket", "ticket_status_log", "ticket_comment"}
            assert [r.cells for r in e.rows["ticket"]] == [d.row("ticket", {"ticket_id": ticket}).values()]
            log = d.partition("ticket_status_log", {"ticket_id": ticket})
            assert len(e.rows["ticket_status_log"]) == len(log)
            assert e.states["ticket_status_log"] == d.state(
                "ticket_status_log", {"ticket_id": ticket}, STATUSES
            )
            doc, version = d.documents("tickets")[ticket]
            assert e.marks["tickets"] == version == e.reflects
            if e.states["ticket_status_log"] is not None:
                assert doc.get("status") == e.states["ticket_status_log"].state
                checked += 1
            json.dumps(e.to_dict())
        assert checked >= 3


def test_an_activity_platform_activity_its_rows_and_current_engagement() -> None:
    history = activity_history(3, 120, 3)
    with Driver(activity_app) as d:
        d.send(history.events)
        q = Queries(d.store, activity_app.views)
        logged = Counter(str(r.key["hub_id"]) for r in d.rows("engagement_log"))
        assert logged
        from agents.engagement import ENGAGEMENT_PRECEDENCE, current_engagement

        documented = 0
        for hub_id, n in logged.most_common(5):
            e = d.run(q.entity("activity_hub", {"hub_id": hub_id}, {"engagement_log": ENGAGEMENT_PRECEDENCE}))
            assert len(e.rows["engagement_log"]) == n
            state = e.states["engagement_log"]
            expected = current_engagement(d.partition("engagement_log", {"hub_id": hub_id}))
            assert state is not None and expected is not None and state.state == expected.state
            hit = d.documents("activities").get(hub_id)
            if hit is not None:
                assert e.marks["activities"] == hit[1] == e.reflects
                assert hit[0].get("engagement_state") == state.state
                documented += 1
        assert documented
