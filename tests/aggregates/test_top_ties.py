"""``top``'s order on ties: the groups with the same value of the measure come in the order of their
series id (the group-key values as compact JSON, ``framework.core.aggregate.series_id``) compared
as text, then by window start: the one rule ``Queries.top``, ``converge query top`` and
``/query/top`` follow and docs/how-to/queries.md states."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import Aggregate, App, Contribution, Event, Row, Window
from framework.aggregates.query import Queries
from framework.core.aggregate import MeasureKind, series_id
from framework.testing.driver import Driver
from tests.aggregates.tasks import DAY, TASK, TaskAgent

#: Group values whose text order differs from their natural order: 10 before 9, "Zed" and "é"
#: (``"\u00e9"``: a backslash) before "apple", strings before numbers before null before true.
LABELS: list[Any] = [9, 10, "apple", "Zed", "é", None, True, 2.5]


class ByLabel(Aggregate):
    """Tasks per label (the task's ``team`` cell read as JSON: any scalar), in daily windows of ``due``."""

    name = "by_label"
    tables = (TASK,)
    group_by = ("label",)
    measures: ClassVar[Mapping[str, MeasureKind]] = {"tasks": "count"}
    window = Window(DAY)

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        live = [r for r in rows["task"] if r.cells]
        if not live:
            return []
        label = json.loads(str(live[0].values()["team"]))  # the team column holds the label as JSON
        return [Contribution({"label": label}, {}, at=float(live[0].values()["due"]))]


def _task(n: int, label: Any, day: int) -> Event:
    payload = {"team": json.dumps(label), "status": "open", "points": 1.0, "due": day * DAY}
    return Event(f"t{n}", f"task-{n}", 10 + n, 10 + n, "task.set", payload)


def test_ties_come_in_series_id_text_order_then_window() -> None:
    app = App("labels", agents=[TaskAgent()], aggregates=[ByLabel()])
    events = [_task(i, label, 3) for i, label in enumerate(LABELS)]
    events += [_task(100, "apple", 1), _task(101, 10, 2)]  # earlier windows of two series
    events += [_task(200, "busy", 5), _task(201, "busy", 5)]  # the one group with 2 tasks
    with Driver(app) as d:
        d.send(events)
        top = d.run(Queries(d.store, app.views).top("by_label", "tasks", limit=100))
    got = [(g.group["label"], g.window) for g in top.groups]
    assert got[0] == ("busy", 5 * DAY)  # the largest first
    ones = [(label, 3 * DAY) for label in LABELS] + [("apple", DAY), (10, 2 * DAY)]
    expected = sorted(ones, key=lambda lw: (series_id([lw[0]]), lw[1]))
    assert got[1:] == expected
    assert [label for label, _ in got[1:]] == ["Zed", "\u00e9", "apple", "apple", 10, 10, 2.5, 9, None, True]
