"""The batch layer on a real Spark standalone cluster (issue 45): a master and two worker JVMs from
pyspark's distribution (``tests/spark/cluster.py``), jobs submitted to ``spark://``.

Both example apps go through backfill (with projection), check, repair and reindex on the cluster,
and the store rows and index documents equal those of the same jobs on ``local[2]``. The code
reaches the executors only through the zip the job ships (``spark.submit.pyFiles``); a SQLite store
not declared shared is refused before Spark starts; a worker JVM killed mid-job (SIGKILL) leaves a
job whose results equal a clean run's.
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
from stores.open import open_wide_store
from tests.spark.cluster import JOB_MARK, Cluster, spark_cluster
from tests.spark.support import TOMBSTONES, documents, run, sqlite_url, unique_alias

__all__ = ["spark_cluster"]

APPS = {"desk": "examples.support_desk.app:app", "activity": "examples.activity_platform.app:app"}


async def _rows(url: str, spec: str) -> dict[str, list[str]]:
    """Every row of every table of the app, with its cells' values and write times."""
    store = await open_wide_store(url)
    try:
        out: dict[str, list[str]] = {}
        for table in load_app(spec).tables:
            rows = [r async for r in store.scan(table.name)]
            out[table.name] = sorted(
                json.dumps(
                    [r.key, {c: repr(v) for c, v in sorted(r.cells.items())}], sort_keys=True, default=str
                )
                for r in rows
            )
        return out
    finally:
        await store.close()


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
        return dict(run(_rows(self.stores[where], self.spec)))

    def docs(self, where: str) -> dict[str, Any]:
        return dict(run(documents(self.es_url, self.aliases[where])))


@pytest.fixture(scope="module")
def runs(
    spark: SparkSession, stack: StackInfo, spark_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Run]]:
    """Both apps backfilled (with projection) on ``local[2]`` and on the cluster, then checked on
    the cluster (one driver process for the four cluster jobs)."""
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


def _new_task_on(worker_dir: Path, sizes: dict[Path, int]) -> bool:
    """Whether an executor log of worker ``worker_dir`` gained a started task past ``sizes``."""
    for log in worker_dir.glob("app-*/*/stderr"):
        with log.open("rb") as f:
            f.seek(sizes.get(log, 0))
            if b"Running task" in f.read():
                return True
    return False


@pytest.fixture(scope="module")
def repaired(runs: dict[str, Run], spark_cluster: Cluster) -> dict[str, Any]:
    """One driver process: check --repair of both apps' corrupted indexes (3 documents deleted, an
    orphan added), reindex of the support desk's, then a backfill of the activity app into a fresh
    store and alias during which worker 0's JVM gets SIGKILL as soon as its executor starts a task
    of that job. The exit statuses, and how long it took."""
    for r in runs.values():
        run(_corrupt(r.es_url, r.aliases["cluster"], sorted(r.docs("cluster"))[:3]))
    desk, activity = runs["desk"], runs["activity"]
    activity.stores["fault"] = sqlite_url(activity.root / "activity-fault.db")
    activity.aliases["fault"] = unique_alias("activity-fault")
    reindex = ["spark", "reindex", *desk.common("cluster"), "--shards", "2"]
    jobs = [desk.check("cluster", "--repair"), reindex, activity.check("cluster", "--repair"),
            activity.backfill("fault")]  # fmt: skip
    assert spark_cluster.local.info is not None
    worker = Path(spark_cluster.local.info.data_dir) / "worker-0"
    started = time.monotonic()
    proc = spark_cluster.start_jobs(*jobs)
    assert proc.stdout is not None
    try:
        while (line := proc.stdout.readline()) and line.strip() != f"{JOB_MARK} {len(jobs) - 1}":
            pass
        sizes = {log: log.stat().st_size for log in worker.glob("app-*/*/stderr")}
        deadline = time.monotonic() + 120
        while not _new_task_on(worker, sizes) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = proc.poll() is None
        spark_cluster.local.kill_worker(0)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    print(f"cluster repair of both apps, reindex of one, backfill with a killed worker: "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip
    return {"codes": json.loads(out.strip().splitlines()[-1]), "killed_mid_job": killed}


def test_repair_and_reindex_on_the_cluster(runs: dict[str, Run], repaired: dict[str, Any]) -> None:
    assert repaired["codes"][:3] == [0, 0, 0]
    for r in runs.values():
        report = next(iter(r.check_report("cluster", "--repair").values()))
        assert report["check"]["counts"]["missing"] == 3 and report["check"]["counts"]["orphaned"] == 1
        assert report["after_repair"]["clean"]
        assert r.docs("cluster") == r.docs("local")


def test_a_worker_killed_mid_job_leaves_the_results_of_a_clean_run(
    runs: dict[str, Run], repaired: dict[str, Any], spark_cluster: Cluster
) -> None:
    """SIGKILL to worker 0's JVM while its executor runs a backfill task: its executor exits, Spark
    reruns the lost tasks on the other worker and the job ends with the clean run's rows and
    documents (every write is an upsert at the event's version). One worker is left."""
    assert repaired["killed_mid_job"], "the backfill ended before a task ran on worker 0"
    assert repaired["codes"][3] == 0
    r = runs["activity"]
    assert r.rows("fault") == r.rows("local")
    assert r.docs("fault") == r.docs("local")
    assert spark_cluster.local.info is not None
    assert master_state(spark_cluster.local.info)["aliveworkers"] == 1


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
