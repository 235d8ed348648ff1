"""Aggregates in batch: recomputed from the store with Spark, equal to what the stream materialized,
and the check finds and repairs what a lost change announcement or a damaged table leaves."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import framework.testing.driver as driver_module
from framework import Delete, Event, Upsert
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.aggregates.totals import repair_version
from framework.cli import main
from framework.core.aggregate import group_id, parse_series, series_id
from framework.core.mutations import Mutation
from framework.kafka_admin import end_offsets, ensure_topics, produce
from framework.local_stack import StackInfo
from framework.testing import Driver
from spark_batch.aggregate_check import AggregateRun, check
from spark_batch.aggregate_repair import repair
from spark_batch.aggregates import aggregate
from stores.open import open_wide_store
from stores.sqlite.store import SqliteStore
from tests.aggregates.tasks import DAY, task_app
from tests.spark.support import mutations, populate, run, sqlite_url

APP = "tests.aggregates.tasks:task_app"
BY, DUE = "by_team_status", "due_by_team"


def _set(task: str, version: int, **cells: Any) -> Event:
    return Event(f"set-{task}-{version}", task, version, version, "task.set", cells)


def _history(rng: random.Random) -> list[Event]:
    """60 background tasks edited a few times (some deleted), and the tasks the corruption uses."""
    events = []
    for i in range(60):
        for v in sorted(rng.sample(range(10, 100), rng.randint(1, 3))):
            cells = {"team": rng.choice(["red", "blue"]), "status": rng.choice(["open", "done"]),
                     "points": float(rng.randint(0, 9)), "due": rng.randint(0, 5) * DAY + 60}  # fmt: skip
            events.append(_set(f"t{i}", v, **cells))
        if i % 7 == 0:
            events.append(Event(f"del-t{i}", f"t{i}", 200, 200, "task.delete", {}))
    events += [
        _set("R1", 5, team="red", status="open", points=1.0),
        _set("Y1", 5, team="blue", status="open", points=2.0),
        _set("X1", 5, team="amber", status="done", points=3.0),
        _set("X2", 6, team="amber", status="done", points=4.0),
        _set("W1", 5, team="amber", status="hold", points=5.0),
        _set("W2", 6, team="amber", status="hold", points=6.0),
    ]
    delivered = [e for e in events for _ in range(rng.randint(1, 2))]
    rng.shuffle(delivered)
    return delivered + delivered[-10:]  # a replayed tail


@pytest.fixture()
def streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store file of a Driver run of the task app over a shuffled history with duplicates."""
    path = tmp_path / "wide.db"
    monkeypatch.setattr(driver_module, "SqliteStore", lambda _, **kw: SqliteStore(path, **kw))
    with Driver(task_app()) as d:
        assert d.send(_history(random.Random(26))) == []
        assert d.totals(BY) and d.totals(DUE)
    return sqlite_url(path)


def _check(spark: SparkSession, url: str, name: str) -> AggregateRun:
    return check(spark, app=APP, name=name, store_url=url, shards=2)


def _counts(r: AggregateRun) -> tuple[dict[str, int], dict[str, int]]:
    return r.report.entity_counts, r.report.group_counts


async def _write(url: str, writes: list[Mutation]) -> None:
    store = await open_wide_store(url)
    try:
        await store.apply(writes)
    finally:
        await store.close()


async def _totals(url: str, name: str) -> dict[str, tuple[dict[str, float], int]]:
    """``{group id: (measures, write time)}`` of the aggregate's ``_totals`` table."""
    t = tables_of(task_app().aggregate(name))
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan(t.totals.name)]
    finally:
        await store.close()
    return {
        group_id(parse_series(str(r.key["series"])), int(str(r.key["window"]))): (
            decode_measures(r.cells["measures"].value),
            r.version,
        )
        for r in rows
    }


def _damage(url: str) -> int:
    """What a lost change announcement and a damaged table leave in the store; returns the group
    topic's end offset the Driver's totals stand for (the Driver numbers every topic's records from
    one counter and writes a record's totals at ``stream_version``, twice its offset plus two: half
    the highest write time is one past every record it wrote totals for)."""
    app = task_app()
    agg = app.aggregate(BY)
    t = tables_of(agg)
    before = run(_totals(url, BY))
    red_open = before[group_id(["red", "open"])][1]
    highest = max(v for _, v in before.values())
    stray = {"series": series_id(["cyan", "open"]), "window": 0}
    writes: list[Mutation] = [
        # source rows written, their change never projected: an edit, a delete and a new task
        *mutations(_set("X1", 300, points=30.0), app),
        *mutations(Event("del-W1", "W1", 300, 300, "task.delete", {}), app),
        *mutations(_set("Z1", 300, team="green", status="hold", points=1.0), app),
        # a contribution of Y1 to a group it is not in, in both contribution tables
        Upsert(t.contrib.name, {"entity": "Y1", **stray}, {"measures": encode_measures({"tasks": 1})}, 1),
        Upsert(t.members.name, {**stray, "bucket": agg.bucket_of("Y1"), "entity": "Y1"},
               {"measures": encode_measures({"tasks": 1})}, 1),
        # a totals row deleted, and one of a group nobody is in
        Delete(t.totals.name, {"series": series_id(["red", "open"]), "window": 0}, red_open),
        Upsert(t.totals.name, {"series": series_id(["purple", "open"]), "window": 0},
               {"measures": encode_measures({"tasks": 2, "points": 1.0}), "members": 2, "reflects": 1}, 1),
    ]  # fmt: skip
    run(_write(url, writes))
    return highest // 2


def test_check_finds_nothing_after_a_stream_run_and_aggregate_counts(
    spark: SparkSession, streamed: str
) -> None:
    for name in (BY, DUE):
        r = _check(spark, streamed, name)
        try:
            rep = r.report
            assert rep.clean, rep.to_dict()
            assert rep.entities == 66 and rep.contributions > 40 and rep.groups >= 6  # deleted tasks count
            assert rep.stored_contributions == rep.contributions and rep.stored_groups == rep.groups
        finally:
            r.release()
        counted = aggregate(spark, app=APP, name=name, store_url=streamed, shards=2)
        assert (counted.entities, counted.contributions, counted.groups) == (
            rep.entities, rep.contributions, rep.groups
        )  # fmt: skip


def test_check_reports_each_damage_and_repair_fixes_it(spark: SparkSession, streamed: str) -> None:
    end = _damage(streamed)
    r = _check(spark, streamed, BY)
    try:
        entities, groups = _counts(r)
        assert entities == {"missing": 1, "extra": 1, "wrong": 2}, r.report.samples
        assert groups == {"missing": 2, "extra": 1, "wrong": 2}, r.report.samples
        s = r.report.samples
        assert s["entities missing"] == ["Z1"] and s["entities extra"] == ["W1"]
        assert s["entities wrong"] == ["X1", "Y1"]
        assert s["groups missing"] == [group_id(["green", "hold"]), group_id(["red", "open"])]
        assert s["groups extra"] == [group_id(["purple", "open"])]
        assert s["groups wrong"] == [group_id(["amber", "done"]), group_id(["amber", "hold"])]
        writes = repair(spark, r, store_url=streamed, ends={0: end}, partitions=2)
    finally:
        r.release()
    # the four entities; the groups found, cyan/open, which Y1's write emptied, and every other
    # group the rewritten entities are in (announced whether it changed or not)
    assert writes == {"contributions": 4, "totals": 5, "totals_deleted": 2}
    for name in (BY, DUE):
        again = _check(spark, streamed, name)
        try:
            assert again.report.clean, again.report.to_dict()
            assert again.report.contributions > 40
        finally:
            again.release()
    totals = run(_totals(streamed, BY))
    assert totals[group_id(["amber", "done"])][0] == {"points": 34.0, "tasks": 2, "top": 30.0}
    rewritten = [g for g in totals if '"amber"' in g or '"green"' in g or g == group_id(["red", "open"])]
    assert len(rewritten) == 4 and all(totals[g][1] == repair_version(end) for g in rewritten)


def test_cli_aggregate_counts_and_check_exits_1_on_damage(
    spark: SparkSession, streamed: str, tmp_path: Path
) -> None:
    common = ["--app", APP, "--store", streamed, "--shards", "2", "--quiet"]
    assert main(["spark", "aggregate", *common, "--report", str(tmp_path / "agg.json")]) == 0
    counted = json.loads((tmp_path / "agg.json").read_text())
    assert set(counted) == {BY, DUE} and counted[BY]["entities"] == 66 and counted[DUE]["groups"] > 0
    assert "clean" not in counted[BY]  # recomputed only: nothing read from the aggregate's tables
    _damage(streamed)
    checking = ["spark", "check", *common, "--report", str(tmp_path / "check.json")]
    assert main(checking) == 1
    found = json.loads((tmp_path / "check.json").read_text())
    assert found[BY]["check"]["groups_divergent"] == {"missing": 2, "extra": 1, "wrong": 2}
    assert found[DUE]["check"]["clean"] and "after_repair" not in found[BY]
    assert main([*checking[:-2], "--aggregate", DUE]) == 0
    assert main(["spark", "aggregate", *common, "--aggregate", "nope"]) == 2


def test_cli_repair_writes_totals_above_the_group_topic_end(
    spark: SparkSession, streamed: str, stack: StackInfo, tmp_path: Path
) -> None:
    """``check --repair`` reads the group topic's end from the broker: the topic stands for the
    Driver's, so it is filled up to the end the Driver's totals stand for first."""
    highest = _damage(streamed)
    broker, topic = f"kafka://{stack.kafka_bootstrap}", task_app().group_topic(task_app().aggregate(BY))
    run(ensure_topics(broker, {topic: 1}))
    short = highest - run(end_offsets(broker, topic)).get(0, 0)
    run(produce(broker, topic, ((None, b"{}") for _ in range(max(short, 0)))))
    end = run(end_offsets(broker, topic))[0]
    args = ["spark", "check", "--app", APP, "--store", streamed, "--shards", "2", "--aggregate", BY]
    report = tmp_path / "repair.json"
    assert main([*args, "--repair", "--broker", broker, "--quiet", "--report", str(report)]) == 0
    done = json.loads(report.read_text())[BY]
    assert done["check"]["repair"]["writes"] == {"contributions": 4, "totals": 5, "totals_deleted": 2}
    assert done["after_repair"]["clean"] and not done["check"]["clean"]
    assert run(_totals(streamed, BY))[group_id(["red", "open"])][1] == repair_version(end)


def test_cli_aggregate_write_materializes_a_store_the_stream_never_aggregated(
    spark: SparkSession, stack: StackInfo, tmp_path: Path
) -> None:
    """Source rows and marks only (as a backfill leaves them): ``aggregate --write`` creates the
    aggregate's tables and writes every contribution and total; the stream's totals equal them."""
    events = _history(random.Random(7))
    url = sqlite_url(tmp_path / "backfilled.db")
    run(populate(url, events, task_app()))
    broker = f"kafka://{stack.kafka_bootstrap}"
    run(ensure_topics(broker, {task_app().group_topic(task_app().aggregate(DUE)): 1}))
    args = ["spark", "aggregate", "--app", APP, "--store", url, "--shards", "2", "--aggregate", DUE]
    report = tmp_path / "write.json"
    assert main([*args, "--write", "--broker", broker, "--quiet", "--report", str(report)]) == 0
    done = json.loads(report.read_text())[DUE]
    assert done["check"]["entities_divergent"]["missing"] == done["check"]["contributing"] > 0
    assert done["after_repair"]["clean"]
    with Driver(task_app()) as d:
        d.send(events)
        streamed = d.totals(DUE)
    assert {g: m for g, (m, _) in run(_totals(url, DUE)).items()} == streamed and streamed


def _platform_events() -> list[Event]:
    from examples.activity_platform.generator import generate_history

    return list(generate_history(2024, 600, n_orgs=3).events)


def _desk_events() -> list[Event]:
    from examples.support_desk.generator import generate_history

    return list(generate_history(8, 200).events)


@pytest.mark.parametrize(
    ("spec", "events"),
    [
        ("examples.activity_platform.app:app", _platform_events),
        ("examples.support_desk.app:app", _desk_events),
    ],
)
def test_each_example_apps_aggregates_equal_their_batch_recomputation(
    spark: SparkSession, spec: str, events: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example app's generated history (arrival order with duplicates and replays) through the
    Driver: every aggregate's stored contributions and totals are its Spark recomputation's."""
    from spark_batch.apps import load_app

    app = load_app(spec)
    path = tmp_path / "wide.db"
    monkeypatch.setattr(driver_module, "SqliteStore", lambda _, **kw: SqliteStore(path, **kw))
    with Driver(app) as d:
        assert d.send(events()) == []
    assert app.aggregates
    for a in app.aggregates:
        r = check(spark, app=spec, name=a.name, store_url=sqlite_url(path), shards=2)
        try:
            assert r.report.clean, r.report.to_dict()
            assert r.report.contributions > 0 and r.report.groups > 0
            assert r.report.stored_groups == r.report.groups
        finally:
            r.release()
