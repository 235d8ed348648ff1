"""The batch layer on a real Spark standalone cluster (issue 45): a master and two worker JVMs from
pyspark's distribution (``tests/spark/cluster.py``), jobs submitted to ``spark://``.

Both example apps go through backfill (with projection), check, repair and reindex on the cluster,
and the store rows and index documents equal those of the same jobs on ``local[2]``. The code
reaches the executors only through the zip the job ships (``spark.submit.pyFiles``); a SQLite store
not declared shared is refused before Spark starts. ``test_cluster_jobs.py`` runs the other jobs,
``test_cluster_faults.py`` kills worker JVMs and drivers mid-job.
"""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk.generator import generate_history as desk_history
from examples.support_desk.history import deliver
from framework.cli import main
from framework.local_spark import master_state
from framework.local_stack import StackInfo
from spark_batch.apps import load_app
from spark_batch.archive import write_jsonl
from spark_batch.io import open_index
from tests.spark.cluster import Cluster, spark_cluster, store_rows
from tests.spark.support import TOMBSTONES, documents, run, sqlite_url, unique_alias

__all__ = ["spark_cluster"]

APPS = {"desk": "examples.support_desk.app:app", "activity": "examples.activity_platform.app:app"}


class Run:
    """One app's jobs: the archive, and per master (``local``, ``cluster``) its store and alias."""

    def __init__(self, name: str, root: Path, es_url: str) -> None:
        self.name, self.spec, self.root = name, APPS[name], root
        self.archive = root / f"{name}.jsonl"
        self.es_url = es_url
        self.stores = {m: sqlite_url(root / f"{name}-{m}.db") for m in ("local", "cluster")}
        self.aliases = {m: unique_alias(f"{name}-{m}") for m in ("local", "cluster")}

    def common(self, where: str) -> list[str]:
        return ["--app", self.spec, "--wide-store", self.stores[where], "--es-url", self.es_url,
                "--es-tombstones", TOMBSTONES, "--alias", self.aliases[where], "--quiet"]  # fmt: skip

    def backfill(self, where: str) -> list[str]:
        dlq = str(self.root / f"{self.name}-{where}-dlq")
        return ["spark", "backfill", str(self.archive), "--project", "--dlq-root", dlq, *self.common(where)]

    def check(self, where: str, *extra: str) -> list[str]:
        report = str(self.root / f"{self.name}-{where}-check{'-'.join(extra)}.json")
        return ["spark", "check", *self.common(where), "--shards", "2", "--slices", "2", *extra,
                "--report", report]  # fmt: skip

    def aggregate(self, where: str) -> list[str]:
        """Recompute the aggregates from the store (``--write`` needs the group topics a worker creates)."""
        report = str(self.root / f"{self.name}-{where}-aggregate.json")
        return ["spark", "aggregate", "--app", self.spec, "--wide-store", self.stores[where], "--shards", "2",
                "--quiet", "--report", report]  # fmt: skip

    def aggregate_report(self, where: str) -> dict[str, Any]:
        return dict(json.loads((self.root / f"{self.name}-{where}-aggregate.json").read_text()))

    def check_report(self, where: str, *extra: str) -> dict[str, Any]:
        path = self.root / f"{self.name}-{where}-check{'-'.join(extra)}.json"
        return dict(json.loads(path.read_text()))

    def rows(self, where: str) -> dict[str, list[str]]:
        return dict(run(store_rows(self.stores[where], self.spec)))

    def docs(self, where: str) -> dict[str, Any]:
        return dict(run(documents(self.es_url, self.aliases[where])))


@pytest.fixture(scope="module")
def runs(
    spark: SparkSession, stack: StackInfo, spark_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Run]]:
    """Both apps backfilled (with projection) on ``local[2]`` and on the cluster, then checked on
    the cluster (one driver process for the four cluster jobs)."""
    spark_cluster.ensure_workers()
    root = tmp_path_factory.mktemp("cluster-jobs")
    desk, activity = (Run(n, root, stack.es_url) for n in ("desk", "activity"))
    write_jsonl(deliver(desk_history(5, 60).events, 5), desk.archive)  # scrambled, with duplicates
    write_jsonl(activity_history(17, 400).events, activity.archive)
    for r in (desk, activity):
        assert main([*r.backfill("local"), "--master", "local[2]"]) == 0
        assert main([*r.aggregate("local"), "--master", "local[2]"]) == 0
    started = time.monotonic()
    codes = spark_cluster.run_jobs(
        ["probe", desk.spec], desk.backfill("cluster"), desk.check("cluster"), desk.aggregate("cluster"),
        activity.backfill("cluster"), activity.check("cluster"), activity.aggregate("cluster"),
    )  # fmt: skip
    print(f"cluster backfill + check of both apps: {time.monotonic() - started:.1f} s")
    files = codes.pop(0)
    assert files and all("converge-code.zip" in f for f in files), files  # the shipped code, not the checkout
    assert codes == [0] * 6
    yield {"desk": desk, "activity": activity}


def test_the_cluster_is_two_alive_workers(spark_cluster: Cluster) -> None:
    assert spark_cluster.local.info is not None
    state = master_state(spark_cluster.local.info)
    assert state["aliveworkers"] == 2 and {w["cores"] for w in state["workers"] if w["state"] == "ALIVE"} == {
        1
    }


@pytest.mark.parametrize("name", sorted(APPS))
def test_backfill_on_the_cluster_equals_local(runs: dict[str, Run], name: str) -> None:
    r = runs[name]
    rows, docs = r.rows("cluster"), r.docs("cluster")
    assert sum(map(len, rows.values())) > 0 and docs
    assert rows == r.rows("local")
    assert docs == r.docs("local")
    checked = next(iter(r.check_report("cluster").values()))["check"]
    assert checked["clean"] and checked["expected_docs"] == len(docs)


@pytest.mark.parametrize("name", sorted(APPS))
def test_aggregates_on_the_cluster_equal_local(runs: dict[str, Run], name: str) -> None:
    """``aggregate`` (recomputed from the store) on both: the same entities, contributions and groups."""
    r = runs[name]
    cluster, local = r.aggregate_report("cluster"), r.aggregate_report("local")
    assert set(cluster) == set(local) and cluster
    for name_, report in cluster.items():
        drop = ("seconds",)
        assert {k: v for k, v in report.items() if k not in drop} == {
            k: v for k, v in local[name_].items() if k not in drop
        }
        assert report["groups"] > 0


async def _corrupt(es_url: str, alias: str, ids: list[str]) -> None:
    """Delete documents ``ids`` and add an orphan."""
    index = open_index(es_url, TOMBSTONES)
    try:
        concrete = (await index.alias_indices(alias))[0]
        for doc_id in ids:
            await index.client.delete(index=concrete, id=doc_id)
        assert await index.index(alias, "no-such-entity", {"subject": "ghost"}, 10)
    finally:
        await index.close()


@pytest.fixture(scope="module")
def repaired(runs: dict[str, Run], spark_cluster: Cluster) -> list[Any]:
    """One driver process: check --repair of both apps' corrupted indexes (3 documents deleted, an
    orphan added) and reindex of the support desk's; the exit statuses."""
    for r in runs.values():
        run(_corrupt(r.es_url, r.aliases["cluster"], sorted(r.docs("cluster"))[:3]))
    desk, activity = runs["desk"], runs["activity"]
    reindex = ["spark", "reindex", *desk.common("cluster"), "--shards", "2"]
    started = time.monotonic()
    codes = spark_cluster.run_jobs(
        desk.check("cluster", "--repair"), reindex, activity.check("cluster", "--repair")
    )
    print(f"cluster repair of both apps, reindex of one: {time.monotonic() - started:.1f} s")
    return codes


def test_repair_and_reindex_on_the_cluster(runs: dict[str, Run], repaired: list[Any]) -> None:
    assert repaired == [0, 0, 0]
    for r in runs.values():
        report = next(iter(r.check_report("cluster", "--repair").values()))
        assert report["check"]["counts"]["missing"] == 3 and report["check"]["counts"]["orphaned"] == 1
        assert report["after_repair"]["clean"]
        assert r.docs("cluster") == r.docs("local")


def test_a_driver_only_store_is_refused_on_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CONVERGE_SHARED_PATHS", raising=False)
    (tmp_path / "a.jsonl").write_text("")
    argv = ["spark", "backfill", str(tmp_path / "a.jsonl"), "--app", APPS["desk"], "--quiet",
            "--wide-store", sqlite_url(tmp_path / "w.db"), "--master", "spark://127.0.0.1:1"]  # fmt: skip
    started = time.monotonic()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--shared-store" in err and "cassandra://" in err, err
    assert time.monotonic() - started < 10  # refused before Spark starts: no JVM, no connection
    monkeypatch.setenv("CONVERGE_SHARED_PATHS", str(tmp_path))
    from spark_batch.preflight import shared_store_refusal

    assert shared_store_refusal("spark://h:7077", sqlite_url(tmp_path / "w.db"), str(tmp_path)) is None
    assert shared_store_refusal("spark://h:7077", sqlite_url(tmp_path / "w.db"), None, shared=True) is None
    assert shared_store_refusal("local[2]", sqlite_url(tmp_path / "w.db")) is None
    assert shared_store_refusal("spark://h:7077", "cassandra://h/ks") is None


def test_the_code_zip_holds_converge_and_the_apps_packages(tmp_path: Path) -> None:
    from spark_batch.session import code_zip, session_conf

    load_app(APPS["activity"])  # the app imports agents/ (its project's other package): shipped too
    with zipfile.ZipFile(code_zip(APPS["activity"], tmp_path)) as zf:
        names = zf.namelist()
    tops = {n.split("/", 1)[0] for n in names}  # (and tests/: this process imported it from the checkout)
    assert tops >= {"framework", "stores", "spark_batch", "examples", "agents"} and ".venv" not in tops
    assert "examples/activity_platform/app.py" in names and not [n for n in names if "__pycache__" in n]
    conf = session_conf("spark://127.0.0.1:7077")
    assert conf["spark.driver.host"] == "127.0.0.1" and "spark.python.daemon.module" not in conf
