"""A repair's totals never tie with nor shadow the stream's (issue 42, item 4).

The stream writes a group's totals for each group topic record (``TotalsProcessor``); a repair
(``converge spark check --repair``, ``spark aggregate --write``) writes them at
``spark_batch.aggregate_repair.totals_version`` of the partition's end offset, read before it
read the contributions. The model, written here: the repair's totals include every record below
the end, so they must replace all of those; the stream's write of any record at or past the end
is computed later, so the last such record's totals must win, whatever the values (a tie would
be won by the larger JSON value: a repaired 900 would keep the stream's next 100 out). Totals
stored under the former rule (offset plus one) are replaced by both.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.aggregates.totals import TotalsProcessor, recompute
from framework.core.aggregate import Group, series_id
from framework.core.mutations import Upsert
from framework.runtime.work import Work
from framework.testing.driver import Driver
from spark_batch.aggregate_repair import totals_version
from tests.aggregates.tasks import task_app

BY = "by_team_status"
GROUP = Group(("red", "open"), 0)
KEY = {"series": series_id(GROUP.series), "window": 0}


class _Group:
    """One group of the task app's ``by_team_status`` over the Driver's store: its single member's
    points set to any value, its totals recomputed by the stream's processor or by a repair."""

    def __init__(self, d: Driver) -> None:
        self.d, self.agg = d, d.app.aggregate(BY)
        self.t = tables_of(self.agg)
        self.clock = itertools.count(1)
        self.stream = TotalsProcessor(self.agg, d.store)

    def _members(self, points: int) -> None:
        key = {**KEY, "bucket": self.agg.bucket_of("m"), "entity": "m"}
        cells = {"measures": encode_measures({"tasks": 1, "points": float(points), "top": float(points)})}
        self.d.run(self.d.store.apply([Upsert(self.t.members.name, key, cells, next(self.clock))]))

    def stream_writes(self, offset: int, points: int) -> None:
        self._members(points)
        work = Work(("groups", 0), offset, b"k", b"{}")
        self.d.run(self.stream.write_batch([(work, [(GROUP, None)])]))

    def repair_writes(self, end: int, points: int) -> None:
        self._members(points)
        self.d.run(recompute(self.d.store, self.agg, {GROUP: totals_version({0: end}, GROUP)}))

    def former_rule_writes(self, offset: int, points: int) -> None:
        """What a worker of the former rule stored: the totals at the offset plus one."""
        self._members(points)
        self.d.run(recompute(self.d.store, self.agg, {GROUP: offset + 1}))

    def points(self) -> float:
        row = self.d.run(self.d.store.read_row(self.t.totals.name, KEY))
        assert row is not None
        return float(decode_measures(row.cells["measures"].value)["points"])


def test_the_streams_next_record_after_a_repair_wins_900_then_100() -> None:
    """The live stores' case: records 0..4 on the topic, the repair writes 900, the stream's next
    record (offset 5, the end the repair read) computes 100."""
    with Driver(task_app()) as d:
        g = _Group(d)
        for o in range(5):
            g.stream_writes(o, 10 * o)
        g.repair_writes(5, 900)
        assert g.points() == 900
        g.stream_writes(5, 100)
        assert g.points() == 100


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, int, int, list[int], int, list[tuple[str, int]]]:
    """``(upgraded_at, end, n, values, repaired, writes)``: records ``0..n-1`` with their points,
    those below ``upgraded_at`` stored under the former rule first; the repair read ``end``
    (``upgraded_at <= end <= n``) and writes ``repaired``; ``writes`` is the order of the rest:
    the stream's records in offset order, replays of earlier records (with their old points)
    anywhere after them, and the repair anywhere."""
    n = draw(st.integers(0, 8))
    upgraded_at = draw(st.integers(0, n))
    end = draw(st.integers(upgraded_at, n))
    values = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n))
    repaired = draw(st.integers(0, 10_000))
    writes: list[tuple[str, int]] = [("stream", o) for o in range(upgraded_at, n)]
    for _ in range(draw(st.integers(0, 4))):
        if writes:
            at = draw(st.integers(0, len(writes) - 1))
            if writes[at][0] == "stream":
                later = draw(st.integers(at + 1, len(writes)))
                writes.insert(later, writes[at])
    writes.insert(draw(st.integers(0, len(writes))), ("repair", end))
    return upgraded_at, end, n, values, repaired, writes


@settings(max_examples=150, deadline=None)
@given(_runs())
def test_a_repair_replaces_the_records_below_its_end_and_the_next_stream_write_replaces_it(
    run: tuple[int, int, int, list[int], int, list[tuple[str, int]]],
) -> None:
    upgraded_at, end, n, values, repaired, writes = run
    with Driver(task_app()) as d:
        g = _Group(d)
        for o in range(upgraded_at):
            g.former_rule_writes(o, values[o])
        for kind, o in writes:
            if kind == "stream":
                g.stream_writes(o, values[o])
            else:
                g.repair_writes(o, repaired)
        # the model: the last record at or past the end wins; without one, the repair
        expected = values[n - 1] if n > end else repaired
        assert g.points() == expected
