"""Revision counts of final windows in batch: ``converge spark check`` never compares them, and its
repair, which rewrites totals through the stream's ``recompute`` with the executor's clock, counts
one revision for a final window whose totals it changes and keeps the count of one it rewrites
unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import framework.testing.driver as driver_module
from framework import Event, Upsert
from framework.aggregates.tables import encode_measures, tables_of
from framework.aggregates.totals import repair_version
from framework.core.aggregate import group_id, parse_series, series_id
from framework.testing import Driver
from spark_batch.aggregate_check import check
from spark_batch.aggregate_repair import repair
from stores.open import open_wide_store
from stores.sqlite.store import SqliteStore
from tests.aggregates.tasks import DAY, DueFinal, revising_app
from tests.spark.support import run, sqlite_url

APP = "tests.aggregates.tasks:revising_app"
NAME = DueFinal.name
RED_9, RED_10 = group_id(["red"], 9 * DAY), group_id(["red"], 10 * DAY)


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


async def _revisions(url: str) -> dict[str, tuple[int, int]]:
    """``{group id: (revisions, write time of the measures)}`` of the ``due_final`` totals."""
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan(tables_of(DueFinal()).totals.name)]
    finally:
        await store.close()
    return {
        group_id(parse_series(str(r.key["series"])), int(str(r.key["window"]))): (
            int(str(r.cells["revisions"].value)),
            r.cells["measures"].writetime,
        )
        for r in rows
    }


@pytest.fixture()
def revised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store where red's two windows of day 10 were revised once, after they were final."""
    path = tmp_path / "wide.db"
    monkeypatch.setattr(driver_module, "SqliteStore", lambda _, **kw: SqliteStore(path, **kw))
    with Driver(revising_app(), now=11 * DAY) as d:
        tasks = [_set(f"t{i}", 10 + i, team=team, status="open", points=float(i), due=10 * DAY)
                 for i, team in enumerate(["red", "red", "blue", "blue"])]  # fmt: skip
        assert d.send(tasks) == []
        d.now = 20 * DAY
        assert d.send(_set("t0", 30, points=7.0)) == []
        assert d.revisions(NAME) == {RED_9: 1, RED_10: 1}
    return sqlite_url(path)


def test_check_ignores_revisions_and_repair_counts_what_it_changes(spark: SparkSession, revised: str) -> None:
    before = run(_revisions(revised))
    assert {g: n for g, (n, _) in before.items()} == {
        RED_9: 1, RED_10: 1, group_id(["blue"], 9 * DAY): 0, group_id(["blue"], 10 * DAY): 0,
    }  # fmt: skip
    t = tables_of(DueFinal())
    red_10 = {"series": series_id(["red"]), "window": 10 * DAY}
    blue_10 = {"series": series_id(["blue"]), "window": 10 * DAY}
    highest = max(v for _, v in before.values())
    writes = [
        # another count than the stream's, where the totals are right: not a divergence
        Upsert(t.totals.name, blue_10, {"revisions": 5}, highest + 1),
        # red's day-10 totals damaged, above everything the stream wrote
        Upsert(t.totals.name, red_10, {"measures": encode_measures({"tasks": 9, "least": 0.0})}, highest + 1),
        # a contribution of t0 to a group it is not in (its other groups are rewritten unchanged)
        Upsert(t.contrib.name, {"entity": "t0", "series": series_id(["red"]), "window": 3 * DAY},
               {"measures": encode_measures({"tasks": 1, "least": 0.0})}, 1),
    ]  # fmt: skip

    async def damage() -> None:
        store = await open_wide_store(revised)
        try:
            await store.apply(writes)
        finally:
            await store.close()

    run(damage())
    r = check(spark, app=APP, name=NAME, store_url=revised, shards=2)
    try:
        assert r.report.group_counts == {"missing": 0, "extra": 0, "wrong": 1}, r.report.samples
        assert r.report.samples["groups wrong"] == [RED_10]
        assert r.report.entity_counts == {"missing": 0, "extra": 0, "wrong": 1}, r.report.samples
        done = repair(spark, r, store_url=revised, ends={0: highest + 1}, partitions=2)
    finally:
        r.release()
    assert done == {"contributions": 1, "totals": 2, "totals_deleted": 1}
    after = run(_revisions(revised))
    # red's day 10 changed by the repair: one more; day 9 rewritten unchanged: kept; blue untouched
    assert {g: n for g, (n, _) in after.items()} == {
        RED_9: 1, RED_10: 2, group_id(["blue"], 9 * DAY): 0, group_id(["blue"], 10 * DAY): 5,
    }  # fmt: skip
    assert after[RED_9][1] == after[RED_10][1] == repair_version(highest + 1)
    again = check(spark, app=APP, name=NAME, store_url=revised, shards=2)
    try:
        assert again.report.clean and again.report.stored_groups == 4, again.report.to_dict()
    finally:
        again.release()
