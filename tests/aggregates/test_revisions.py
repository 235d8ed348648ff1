"""Revision counts of final windows (``framework.aggregates.totals``) over the SQLite store: the
toy app's two-day windows made final a day after they end, the Driver's clock moved by hand. A late
edit of a final window counts once; its replay, a duplicated announcement, an edit before the
window is final, a window's first totals and a stale announcement count nothing; a window emptied
after it was final keeps its count; an aggregate without ``final_after_s`` reads and writes none."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from framework import App, Event
from framework.aggregates.query import Queries
from framework.aggregates.tables import tables_of
from framework.aggregates.totals import TotalsProcessor, group_records
from framework.core.aggregate import Group, group_id
from framework.runtime.work import Work
from framework.testing.driver import Driver
from tests.aggregates.tasks import DAY, DueByTeam, TaskAgent

#: The windows holding a due time of day 10 start on days 9 and 10; the later ends on day 12 and is
#: final from day 13, the earlier from day 12.
DUE = 10 * DAY
BEFORE_FINAL = 11 * DAY
AFTER_FINAL = 20 * DAY
RED_9, RED_10 = group_id(["red"], 9 * DAY), group_id(["red"], 10 * DAY)


class DueFinal(DueByTeam):
    """``DueByTeam``, final one day after a window ends."""

    name: ClassVar[str] = "due_final"
    final_after_s: ClassVar[float | None] = DAY


def _app() -> App:
    return App("tasks", agents=[TaskAgent()], aggregates=[DueFinal(), DueByTeam()])


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


def _driver(now: float) -> Driver:
    d = Driver(_app(), now=now)
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
        records = group_records(agg, [Group(("red",), 9 * DAY), Group(("red",), 10 * DAY)], 1)
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
    with Driver(_app(), now=AFTER_FINAL) as d:  # every window is final from the start
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

