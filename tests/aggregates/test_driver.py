"""Aggregates through the test kit's driver: contributions and totals follow edits, moves between
groups and windows, deletes, and any delivery order with duplicates and replays, equal to a
model computed here from the final tasks."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import App, Event
from framework.core.aggregate import group_id
from framework.testing.driver import Driver
from stores.base import IndexOp
from tests.aggregates.tasks import DAY, bucketed_app, task_app

TEAMS, STATUSES = ["red", "blue"], ["open", "done", "hold"]


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


def _delete(task: str, version: int) -> Event:
    return Event(f"del-{task}-{version}", task, version, version, "task.delete", {})


def test_an_edit_moves_a_task_between_groups_and_a_delete_removes_it() -> None:
    with Driver(task_app()) as d:
        d.send([_set("t1", 1, team="red", status="open", points=3.0, due=10 * DAY),
                _set("t2", 2, team="red", status="open", points=5.0, due=10 * DAY)])  # fmt: skip
        red_open = group_id(["red", "open"])
        assert d.totals("by_team_status") == {red_open: {"tasks": 2, "points": 8.0, "top": 5.0}}
        d.send(_set("t1", 3, status="done"))
        assert d.totals("by_team_status") == {
            red_open: {"tasks": 1, "points": 5.0, "top": 5.0},
            group_id(["red", "done"]): {"tasks": 1, "points": 3.0, "top": 3.0},
        }
        d.send(_set("t1", 1, status="hold"))  # an older edit arrives late: changes nothing
        assert group_id(["red", "hold"]) not in d.totals("by_team_status")
        assert d.totals("due_by_team") == {
            group_id(["red"], 9 * DAY): {"tasks": 1, "least": 5.0},
            group_id(["red"], 10 * DAY): {"tasks": 1, "least": 5.0},
        }
        d.send(_delete("t2", 4))
        assert d.totals("by_team_status") == {
            group_id(["red", "done"]): {"tasks": 1, "points": 3.0, "top": 3.0}
        }
        assert d.totals("due_by_team") == {}
        assert not d.parked


Op = tuple[str, str, dict[str, Any]]  # (kind, task, cells)

ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "set", "set", "delete"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.fixed_dictionaries(
            {},
            optional={
                "team": st.sampled_from(TEAMS),
                "status": st.sampled_from(STATUSES),
                "points": st.integers(0, 9).map(float),
                "due": st.integers(0, 6).map(lambda d: d * DAY + 3600),
            },
        ),
    ).filter(lambda op: op[0] == "delete" or bool(op[2])),  # an upsert writes at least one cell
    min_size=1,
    max_size=25,
)


def _model(history: list[tuple[int, Op]]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """The totals of both aggregates, from the final tasks: each cell the value of the highest
    version that wrote it, unless a delete of a higher version came after."""
    cells: dict[str, dict[str, tuple[int, Any]]] = defaultdict(dict)
    deleted: dict[str, int] = defaultdict(int)
    for version, (kind, task, values) in history:
        if kind == "delete":
            deleted[task] = max(deleted[task], version)
        else:
            for name, value in values.items():
                if version > cells[task].get(name, (0, None))[0]:
                    cells[task][name] = (version, value)
    status: dict[str, dict[str, float]] = {}
    due: dict[str, dict[str, float]] = {}
    for task, cs in cells.items():
        t = {name: value for name, (version, value) in cs.items() if version > deleted[task]}
        if not t:
            continue
        points = float(t.get("points") or 0.0)
        if t.get("team") is not None and t.get("status") is not None:
            g = status.setdefault(
                group_id([t["team"], t["status"]]), {"tasks": 0, "points": 0.0, "top": points}
            )
            g["tasks"] += 1
            g["points"] += points
            g["top"] = max(g["top"], points)
        if t.get("team") is not None and t.get("due") is not None and t.get("status") != "done":
            day = t["due"] // DAY * DAY
            for start in (day - DAY, day):
                g = due.setdefault(group_id([t["team"]], start), {"tasks": 0, "least": points})
                g["tasks"] += 1
                g["least"] = min(g["least"], points)
    return status, due


@pytest.mark.parametrize("make_app", [task_app, bucketed_app], ids=["one bucket", "three buckets"])
@settings(max_examples=300, deadline=None)
@given(history=ops, seed=st.integers(0, 2**32 - 1))
def test_totals_equal_the_model_for_any_delivery(
    make_app: Callable[[], App], history: list[Op], seed: int
) -> None:
    versioned = list(enumerate(history, start=1))
    events = [
        _delete(task, v) if kind == "delete" else _set(task, v, **cells)
        for v, (kind, task, cells) in versioned
    ]
    rng = random.Random(seed)
    delivery = events + rng.sample(events, k=min(len(events), rng.randint(0, 5)))  # duplicates
    rng.shuffle(delivery)
    delivery += rng.sample(events, k=len(events))  # a replay of everything, in another order
    status, due = _model(versioned)
    with Driver(make_app()) as d:
        d.send(delivery)
        assert not d.parked
        assert d.totals("by_team_status") == status
        assert d.totals("due_by_team") == due


def test_a_late_older_edit_under_the_same_mark_still_wins_over_what_was_written() -> None:
    """The mark is the highest version of any write; an older event arriving after a newer one
    changes the rows without raising it, and the contributions rebuilt then must replace those
    written at the same mark (found by the property above)."""
    with Driver(task_app()) as d:
        d.send([_set("a", 2, team="red", status="open", points=1.0), _set("a", 5, team="red")])
        d.send(_set("a", 4, points=0.0))  # older than the mark, newer than the points it replaces
        red_open = group_id(["red", "open"])
        assert d.totals("by_team_status") == {red_open: {"tasks": 1, "points": 0.0, "top": 0.0}}
        assert d.contributions("by_team_status") == {"a": {red_open: {"tasks": 1, "points": 0.0, "top": 0.0}}}


def test_a_document_computed_at_a_lower_mark_is_not_written_over_a_newer_one() -> None:
    """A job or a worker that lost the entity may write contributions it computed from an older
    state: they carry a lower mark than the stored ones, which stay."""
    with Driver(task_app()) as d:
        d.send([_set("a", 5, team="red", status="open", points=1.0)])
        red_open, red_done = group_id(["red", "open"]), group_id(["red", "done"])
        stale = {red_open: {"tasks": 1, "points": 7.0, "top": 7.0}, red_done: {"tasks": 1, "points": 1.0}}
        d.run(d.aggregates.bulk("by_team_status", [IndexOp("a", 3, stale)]))
        assert d.contributions("by_team_status") == {"a": {red_open: {"tasks": 1, "points": 1.0, "top": 1.0}}}
        assert d.totals("by_team_status") == {red_open: {"tasks": 1, "points": 1.0, "top": 1.0}}
