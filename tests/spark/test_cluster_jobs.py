"""Every batch job on the Spark standalone cluster equals the same job on ``local[2]`` (issue 45):
ingest, backfill, check, check ``--repair``, reindex, aggregate ``--write``, changes, idmap and
retention, for both example apps (``tests/spark/test_cluster.py`` holds the cluster's other tests).

Each app runs one chain of jobs twice, once per master, on a store of its own per master: a
backfill (with projection and, given the broker, the aggregates), a check (clean, nothing changed),
``check --repair`` after three documents are deleted and an orphan added on each master's index,
reindex, ``aggregate --write`` of the app's first aggregate after half its totals are deleted,
``changes`` (the notification entries since a new consumer's start, as Parquet), ``idmap`` (the
app's ID requests, planned over the history's owner ids by ``examples.id_requests``, on its
requests topic) and ``retention`` at a fixed clock a year past the history; ``ingest`` reads the
app's events from topics of the test's own into a store and alias of their own per master. The
chain's index is the projection's own alias (``idmap`` and ``retention`` take no ``--alias``), so
each master's runs write to an Elasticsearch endpoint of their own (a noida-db each); the broker is
the session's. Each job runs on ``local[2]`` (in this process) while the same job runs on the
cluster (one driver process for every cluster run: ``Cluster.driver``; it first probes where its
executors import the code from: the shipped zip), so both read the same broker state; after each,
every store row (values and write times) and every document of the alias is snapshotted, and the
two snapshots must be equal and show what the job does (rows moved, deleted, materialized;
documents built, repaired).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.generator import START_MICROS as ACTIVITY_START
from examples.activity_platform.generator import generate_history as activity_history
from examples.id_requests import plan_requests
from examples.support_desk.generator import START_MICROS as DESK_START
from examples.support_desk.generator import generate_history as desk_history
from examples.support_desk.history import by_topic, deliver
from framework.aggregates.tables import tables_of
from framework.cli import main
from framework.core.events import Event
from framework.core.mutations import Delete
from framework.kafka_admin import end_offsets, ensure_topics, produce
from framework.local_stack import LocalStack, StackInfo
from framework.retention import DAY_US
from spark_batch.apps import load_app
from spark_batch.archive import write_jsonl
from spark_batch.io import open_index
from stores.open import open_wide_store
from tests.spark.cluster import Cluster, snapshot, spark_cluster
from tests.spark.support import TOMBSTONES, run, sqlite_url, unique_alias

__all__ = ["spark_cluster"]

#: A shared 2-core machine under load takes minutes for the module's fixture (the default is 300 s).
pytestmark = pytest.mark.timeout(900)

SPECS = {"desk": "examples.support_desk.app:app", "activity": "examples.activity_platform.app:app"}
MASTERS = ("local", "cluster")
#: The chain of jobs of each app, in order.
CHAIN = ("ingest", "backfill", "check", "repair", "reindex", "aggregate", "changes", "idmap", "retention")
JOBS = {"desk": CHAIN, "activity": CHAIN}
#: The jobs that write to the broker (ID map entries, retention's group announcements): run on one
#: master after the other, as every other job runs on both at once.
SERIAL = ("idmap", "retention")
#: Documents of the projection the ``repair`` step deletes before it runs (an orphan is added too).
DELETED = 3


class Chain:
    """One app's inputs and, per master, its stores, aliases and job arguments."""

    def __init__(self, name: str, root: Path, stack: StackInfo, es_urls: dict[str, str]) -> None:
        self.name, self.spec, self.root = name, SPECS[name], root
        self.es_urls, self.broker = es_urls, f"kafka://{stack.kafka_bootstrap}"
        self.archive = root / f"{name}.jsonl"
        uid = uuid.uuid4().hex[:8]
        self.job = f"ingest-{name}-{uid}"
        if name == "desk":
            history = desk_history(5, 60)
            events: list[Event] = list(deliver(history.events, 5))  # scrambled, with duplicates
            self.topics = {t: f"{uid}-{t}" for t in by_topic(events)}
            owners = [(e.event_id, e.payload["tenant"], e.payload["requester_id"], e.version)
                      for e in history.events if e.type == "ticket.created"]  # fmt: skip
            self.now = (DESK_START + (7 + 365) * DAY_US) / 1e6
            publish = by_topic(events)
        else:
            activity = activity_history(17, 400)
            events = list(activity.events)
            self.topics = {t: f"{uid}-{t}" for t in activity.by_topic()}
            owners = [(e.event_id, e.payload["org_id"], e.payload["owner_id"], e.version)
                      for e in activity.distinct() if "owner_id" in e.payload]  # fmt: skip
            self.now = (ACTIVITY_START + (15 + 365) * DAY_US) / 1e6
            publish = activity.by_topic()
        write_jsonl(events, self.archive)
        self.requests = plan_requests(7, owners).requests
        self.publish = {self.topics[t]: evs for t, evs in publish.items()}
        app = load_app(self.spec)
        self.aggregate = app.aggregates[0].name
        self.stores = {m: sqlite_url(root / f"{name}-{m}.db") for m in MASTERS}
        # every view's own alias (the projection's documents, the aggregates' contributions): idmap
        # and retention take no --alias
        self.aliases = ",".join(v.alias for v in app.views)
        self.projection_alias = app.projections[0].alias
        self.ingested = {m: sqlite_url(root / f"{name}-{m}-ingest.db") for m in MASTERS}
        self.ingest_aliases = {m: unique_alias(f"{name}-{m}-ingest") for m in MASTERS}

    def prepare(self) -> None:
        """The topics: the ingest's (the events), the aggregates' group topics, the ID requests';
        on each master's index the aggregates' indices, as the app's worker creates them at its
        start (a backfill creates the projections' only; idmap writes the contributions there)."""
        app = load_app(self.spec)
        mutation = app.id_mutation
        assert mutation is not None and app.aggregates

        async def go() -> None:
            for es_url in self.es_urls.values():
                index = open_index(es_url, TOMBSTONES)
                try:
                    for a in app.aggregates:
                        await index.ensure_index(a.alias, getattr(a, "mappings", None))
                finally:
                    await index.close()
            await ensure_topics(self.broker, {t: 2 for t in self.publish})
            await ensure_topics(self.broker, {app.group_topic(a): 1 for a in app.aggregates})
            await ensure_topics(self.broker, {mutation.requests_topic: 1})
            for topic, evs in self.publish.items():
                await produce(self.broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs])
            await produce(
                self.broker,
                mutation.requests_topic,
                [(None, json.dumps(r.to_dict()).encode()) for r in self.requests],
            )

        run(go())

    def path(self, master: str, what: str) -> Path:
        return self.root / f"{self.name}-{master}-{what}"

    def common(self, master: str, *, ingest: bool = False) -> list[str]:
        store = (self.ingested if ingest else self.stores)[master]
        alias = ["--alias", self.ingest_aliases[master]] if ingest else []
        return ["--app", self.spec, "--wide-store", store, "--es-url", self.es_urls[master],
                "--es-tombstones", TOMBSTONES, *alias, "--quiet"]  # fmt: skip

    def argv(self, job: str, m: str) -> list[str]:
        """``converge`` arguments of ``job`` on master ``m`` (without ``--master``)."""
        cp, locks = sqlite_url(self.path(m, f"{job}-cp.db")), sqlite_url(self.path(m, f"{job}-locks.db"))
        dlq, report = str(self.path(m, "dlq")), str(self.path(m, f"{job}.json"))
        now = ["--now", str(self.now)]
        if job == "ingest":
            topics = [a for t in sorted(self.publish) for a in ("--topic", t)]
            return ["spark", "ingest", *self.common(m, ingest=True), "--job", self.job, "--checkpoints", cp,
                    "--broker", self.broker, "--split", "100", "--dlq-root", dlq,
                    "--report", report, *topics]  # fmt: skip
        if job == "backfill":
            return ["spark", "backfill", str(self.archive), "--project", "--broker", self.broker,
                    "--dlq-root", dlq, *self.common(m)]  # fmt: skip
        if job in ("check", "repair"):
            repair = ["--repair"] if job == "repair" else []
            return ["spark", "check", *self.common(m), "--shards", "2", "--slices", "2", *repair,
                    "--report", report]  # fmt: skip
        if job == "reindex":
            return ["spark", "reindex", *self.common(m), "--shards", "2", "--report", report]
        if job == "aggregate":  # the app's first aggregate (each one is three Spark passes)
            return ["spark", "aggregate", "--app", self.spec, "--wide-store", self.stores[m], "--shards", "2",
                    "--aggregate", self.aggregate, "--write", "--broker", self.broker, "--quiet",
                    "--report", report]  # fmt: skip
        if job == "changes":
            return ["spark", "changes", "--app", self.spec, "--wide-store", self.stores[m], "--quiet",
                    "--checkpoints", cp, "--consumer", "snapshots", "--out", str(self.path(m, "changes")),
                    "--settle", "0", "--start", "earliest", "--report", report]  # fmt: skip
        if job == "idmap":
            return ["spark", "idmap", *self.common(m),
                    "--broker", self.broker, "--checkpoints", cp, "--locks", locks, "--dlq-root", dlq,
                    "--settle", "0", "--until-idle", *now, "--report", report]  # fmt: skip
        assert job == "retention"
        return ["spark", "retention", *self.common(m), "--shards", "2",
                "--checkpoints", cp, "--locks", locks, *now, "--report", report]  # fmt: skip

    def bump(self) -> None:
        """One record more on every partition of the aggregate's group topic: a repair writes its
        totals above the backfill's (``repair_version`` of the topic's end), past the deletes."""
        app = load_app(self.spec)
        topic = app.group_topic(app.aggregate(self.aggregate))

        async def go() -> None:
            ends = await end_offsets(self.broker, topic)
            for n in range(256):  # keys until the default partitioner hit every partition
                await produce(self.broker, topic, [(str(n).encode(), b"{}")])
                now = await end_offsets(self.broker, topic)
                if all(now[p] > e for p, e in ends.items()):
                    return
            raise AssertionError(f"{topic}: not every partition took a record")

        run(go())

    def snapshot_call(self, job: str, m: str) -> list[str]:
        """The ``call`` step that snapshots the store and alias ``job`` wrote on master ``m``."""
        ingest = job == "ingest"
        store = (self.ingested if ingest else self.stores)[m]
        alias = self.ingest_aliases[m] if ingest else self.aliases
        out = str(self.path(m, f"{job}-state.json"))
        return ["call", "tests.spark.cluster:snapshot", store, self.spec, self.es_urls[m], alias, out]

    def state(self, job: str, m: str) -> dict[str, Any]:
        return dict(json.loads(self.path(m, f"{job}-state.json").read_text()))

    def report(self, job: str, m: str) -> dict[str, Any]:
        return dict(json.loads(self.path(m, f"{job}.json").read_text()))


@pytest.fixture(scope="module")
def chains(
    spark: SparkSession, stack: StackInfo, spark_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Chain]]:
    """Both apps' chains, each job on ``local[2]`` and on the cluster; the exit statuses in
    ``Chain.codes``, where the cluster's executors import the code from in ``Chain.probe``."""
    spark_cluster.ensure_workers()
    patch = pytest.MonkeyPatch()
    patch.setenv("CONVERGE_BROKER", f"kafka://{stack.kafka_bootstrap}")  # retention's announcements
    root = tmp_path_factory.mktemp("cluster-chains")
    indexes = {m: LocalStack(root / f"index-{m}") for m in MASTERS}
    es_urls = {m: s.start().es_url for m, s in indexes.items()}
    chains = {name: Chain(name, root, stack, es_urls) for name in SPECS}
    for c in chains.values():
        c.prepare()
    codes: dict[tuple[str, str, str], tuple[int, float]] = {}
    started = time.monotonic()
    with spark_cluster.driver() as driver:
        probes = {name: driver.step(["probe", c.spec]) for name, c in chains.items()}
        for step in range(max(map(len, JOBS.values()))):
            for name, c in chains.items():
                if step >= len(JOBS[name]):
                    continue
                job = JOBS[name][step]
                if job == "aggregate":
                    c.bump()
                    for m in MASTERS:
                        assert run(damage(c.stores[m], c.spec, c.aggregate)) > 0
                if job == "repair":
                    for m in MASTERS:
                        run(corrupt(c.es_urls[m], c.projection_alias, DELETED))
                # the same job on both masters at once (the cluster's in the driver process), but
                # for the jobs that write to the broker: one after the other
                argv, together = c.argv(job, "cluster"), job not in SERIAL
                begun = time.monotonic()
                if together:
                    driver.send(argv)
                local = main([*c.argv(job, "local"), "--master", "local[2]"])
                codes[(name, job, "local")] = (local, time.monotonic() - begun)
                if not together:
                    begun = time.monotonic()
                    driver.send(argv)
                codes[(name, job, "cluster")] = (driver.result(argv), time.monotonic() - begun)
                _call(c.snapshot_call(job, "local"))
                driver.step(c.snapshot_call(job, "cluster"))
    print(f"every job of both apps on local[2] and on the cluster: {time.monotonic() - started:.1f} s")
    for key, (code, seconds) in sorted(codes.items()):
        print(f"  {'/'.join(key)}: exit {code}, {seconds:.1f} s")
    for c in chains.values():
        c.codes = {k[1:]: v[0] for k, v in codes.items() if k[0] == c.name}  # type: ignore[attr-defined]
        c.probe = probes[c.name]  # type: ignore[attr-defined]
    try:
        yield chains
    finally:
        patch.undo()
        for s in indexes.values():
            s.stop()


async def damage(url: str, spec: str, aggregate: str) -> int:
    """Delete every other totals row of ``aggregate`` (at its version, as a lost write leaves it);
    how many."""
    totals = tables_of(load_app(spec).aggregate(aggregate)).totals
    store = await open_wide_store(url)
    try:
        rows = [r async for r in store.scan(totals.name)]
        doomed = [
            Delete(totals.name, dict(r.key), max(c.writetime for c in r.cells.values())) for r in rows[::2]
        ]
        await store.apply(doomed)
        return len(doomed)
    finally:
        await store.close()


async def corrupt(es_url: str, alias: str, n: int) -> None:
    """Delete the first ``n`` documents of ``alias`` (by id) and add an orphan."""
    index = open_index(es_url, TOMBSTONES)
    try:
        await index.refresh(alias)
        ids = sorted([h.doc_id async for h in index.scan(alias)])[:n]
        concrete = (await index.alias_indices(alias))[0]
        for doc_id in ids:
            await index.client.delete(index=concrete, id=doc_id)
        assert len(ids) == n and await index.index(alias, "no-such-entity", {"subject": "ghost"}, 10)
    finally:
        await index.close()


def _call(step: list[str]) -> None:
    """A ``call`` step of the driver, run in this process (the ``local[2]`` side's snapshots)."""
    assert step[1] == "tests.spark.cluster:snapshot"
    run(snapshot(*step[2:]))


def _changes(spark: SparkSession, out: Path) -> dict[str, list[str]]:
    """The Parquet rows ``changes`` wrote per table, as sorted JSON texts."""
    return {
        table.name: sorted(
            json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
            for r in spark.read.parquet(str(table)).collect()
        )
        for table in sorted(out.iterdir())
        if table.is_dir()
    }


def _timeless(report: Any) -> Any:
    """``report`` without its ``seconds``, at any depth."""
    if isinstance(report, dict):
        return {k: _timeless(v) for k, v in report.items() if k != "seconds"}
    return report


def _count(state: dict[str, Any], tables: set[str] | None = None) -> int:
    return sum(len(rows) for t, rows in state["rows"].items() if tables is None or t in tables)


CASES = [(name, job) for name, jobs in JOBS.items() for job in jobs]


def test_the_executors_import_the_shipped_code(chains: dict[str, Chain]) -> None:
    for c in chains.values():
        files = c.probe  # type: ignore[attr-defined]
        assert files and all("converge-code.zip" in f for f in files), files  # not the checkout


@pytest.mark.parametrize(("name", "job"), CASES, ids=[f"{n}-{j}" for n, j in CASES])
def test_the_job_on_the_cluster_equals_local(
    chains: dict[str, Chain], spark: SparkSession, name: str, job: str
) -> None:
    c = chains[name]
    assert c.codes[(job, "local")] == 0 and c.codes[(job, "cluster")] == 0  # type: ignore[attr-defined]
    state, local = c.state(job, "cluster"), c.state(job, "local")
    assert state["rows"] == local["rows"]
    # documents per alias in the same order (the ingest's aliases are each master's own)
    assert list(state["docs"].values()) == list(local["docs"].values())
    projected = state["docs"][c.aliases.split(",")[0] if job != "ingest" else c.ingest_aliases["cluster"]]
    assert _count(state) > 0 and projected, {a: len(d) for a, d in state["docs"].items()}
    app = load_app(c.spec)
    before = c.state(JOBS[name][JOBS[name].index(job) - 1], "cluster") if job != "ingest" else None
    aggregate_tables = {t.name for t in tables_of(app.aggregate(c.aggregate)).all}
    if job == "check":  # clean, and nothing changed
        assert before is not None and state == before
        for m in MASTERS:
            checked = c.report(job, m)[app.projections[0].name]["check"]
            assert checked["clean"] and checked["expected_docs"] == len(projected), checked
    elif job == "repair":  # the deleted documents back, the orphan gone: the backfill's documents
        assert before is not None and state == before
        for m in MASTERS:
            report = c.report(job, m)[app.projections[0].name]
            counts = report["check"]["counts"]
            assert (
                counts["missing"] == DELETED and counts["orphaned"] == 1 and report["after_repair"]["clean"]
            )
    elif job == "reindex":
        assert before is not None and state == before  # the same documents, from a new generation
        assert c.report(job, "cluster")["new_index"].endswith("-v2")
        assert c.report(job, "local")["new_index"].endswith("-v2")
    elif job == "aggregate":  # the deleted totals written again, at a later version
        assert before is not None and state["rows"] != before["rows"]
        assert _count(state, aggregate_tables) == _count(before, aggregate_tables)
        for report in (c.report(job, "cluster"), c.report(job, "local")):
            done = report[c.aggregate]
            assert done["check"]["repair"]["writes"]["totals"] > 0 and done["after_repair"]["clean"], done
        found = [_timeless(c.report(job, m)[c.aggregate]["check"]) for m in MASTERS]
        assert found[0] == found[1]  # the same divergence found (and repaired) on both
    elif job == "changes":
        cluster, mine = (
            _changes(spark, c.path("cluster", "changes")),
            _changes(spark, c.path("local", "changes")),
        )
        assert cluster == mine and sum(map(len, cluster.values())) > 0
    elif job == "idmap":
        owner = next(iter(load_app(c.spec).id_mutation.columns)).table  # type: ignore[union-attr]
        assert before is not None and state["rows"][owner] != before["rows"][owner]
        assert state["rows"]["converge_id_map"]
    elif job == "retention":
        assert before is not None and _count(state) < _count(before)
