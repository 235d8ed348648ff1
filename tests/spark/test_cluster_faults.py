"""Faults of the batch layer on the Spark standalone cluster (issue 45): a worker JVM killed with
SIGKILL while its executor runs a backfill task, and the driver (its Python process and its JVM)
killed with SIGKILL mid-backfill and the backfill run again. Either way the store rows (values and
write times) and the index documents end equal to a clean run of the same backfill on ``local[2]``:
Spark reruns the lost tasks on the other worker, a second run rewrites what the first wrote, and
every write is an upsert at the event's version.

The default suite tries each fault once; the long fault suite (``--faults-long`` or
``CONVERGE_FAULTS_LONG=1``) five times each. Spark's event log keeps every application of the
cluster's drivers, the killed driver's too, and a history server started on it lists them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.activity_platform.generator import generate_history
from framework.cli import main
from framework.local_process import free_port, stop_pid
from framework.local_spark import history_command, master_state
from framework.local_stack import StackInfo
from spark_batch.apps import load_app
from spark_batch.archive import write_jsonl
from stores.errors import PermanentStoreError
from tests.spark.cluster import JOB_MARK, Cluster, running_task_on, spark_cluster, store_rows
from tests.spark.support import TOMBSTONES, documents, run, sqlite_url, unique_alias

__all__ = ["spark_cluster"]

#: A shared 2-core machine under load takes minutes for the module's fixture (the default is 300 s).
pytestmark = pytest.mark.timeout(900)

SPEC = "examples.activity_platform.app:app"


@pytest.fixture(scope="module")
def tries(request: pytest.FixtureRequest) -> int:
    """Tries of each fault: one, five in the long fault suite."""
    long = request.config.getoption("--faults-long") or os.environ.get("CONVERGE_FAULTS_LONG") == "1"
    return 5 if long else 1


class Backfill:
    """The faults' backfill: an archive of 4,000 activity events, the clean ``local[2]`` run's
    rows and documents, and fresh stores and aliases for each faulty run."""

    def __init__(self, root: Path, stack: StackInfo) -> None:
        self.root, self.es_url = root, stack.es_url
        self.archive = root / "activity.jsonl"
        write_jsonl(generate_history(31, 4000).events, self.archive)
        self.clean: dict[str, Any] = {}
        self.runs = 0

    def argv(self, store: str, alias: str) -> list[str]:
        return ["spark", "backfill", str(self.archive), "--project", "--partitions", "8", "--app", SPEC,
                "--wide-store", store, "--es-url", self.es_url, "--es-tombstones", TOMBSTONES,
                "--alias", alias, "--dlq-root", str(self.root / f"dlq-{self.runs}"), "--quiet"]  # fmt: skip

    def fresh(self) -> tuple[Path, str, list[str]]:
        """A new store file, alias and the backfill's arguments into them."""
        self.runs += 1
        db, alias = self.root / f"run-{self.runs}.db", unique_alias(f"fault-{self.runs}")
        return db, alias, self.argv(sqlite_url(db), alias)

    def state(self, db: Path, alias: str) -> dict[str, Any]:
        """The rows and documents as JSON values (the clean run's shape; no documents while the
        alias does not exist)."""
        try:
            docs = run(documents(self.es_url, alias))
        except PermanentStoreError:  # no such index: the run was killed before it projected
            docs = {}
        state = {"rows": run(store_rows(sqlite_url(db), SPEC)), "docs": docs}
        return dict(json.loads(json.dumps(state, sort_keys=True, default=str)))


@pytest.fixture(scope="module")
def backfill(spark: SparkSession, stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Backfill:
    b = Backfill(tmp_path_factory.mktemp("cluster-faults"), stack)
    db, alias, argv = b.fresh()
    assert main([*argv, "--master", "local[2]"]) == 0
    b.clean = b.state(db, alias)
    assert sum(map(len, b.clean["rows"].values())) > 1000 and len(b.clean["docs"]) > 100
    return b


#: The tables the backfill's mapping writes (not the erasure record the driver writes first).
AGENT_TABLES = sorted({t.name for a in load_app(SPEC).agents for t in a.tables})


def _rows_in(db: Path) -> int:
    """Rows of ``AGENT_TABLES`` the store file holds so far (0 before it exists)."""
    if not db.exists():
        return 0
    query = f"SELECT count(*) FROM converge_rows WHERE tbl IN ({','.join('?' * len(AGENT_TABLES))})"  # noqa: S608
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute(query, AGENT_TABLES).fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet, or the writer holds a lock
        return 0


def _wait_for_job(proc: subprocess.Popen[str]) -> None:
    """Read the driver's stdout up to the mark of its job 0."""
    assert proc.stdout is not None
    while (line := proc.stdout.readline()) and line.strip() != f"{JOB_MARK} 0":
        pass
    assert line, f"the driver exited ({proc.poll()}) before its job"


@pytest.fixture()
def cluster(spark_cluster: Cluster) -> Iterator[Cluster]:
    """The session's cluster with both workers alive, before and after the test."""
    spark_cluster.ensure_workers()
    yield spark_cluster
    spark_cluster.ensure_workers()


@pytest.mark.parametrize("attempt", range(5))
def test_a_worker_killed_mid_job_leaves_the_results_of_a_clean_run(
    cluster: Cluster, backfill: Backfill, tries: int, attempt: int, tmp_path: Path
) -> None:
    """SIGKILL to a worker's JVM (worker ``attempt % 2``) while its executor runs a task of the
    backfill (once the store has rows: a task started and not finished): its executor exits with
    it, the driver logs the lost executor (Spark logs an executor-lost task at INFO only), reruns
    the task on the other worker, and the job exits 0 with the clean run's rows and documents."""
    if attempt >= tries:
        pytest.skip("tries 2-5 run in the long fault suite (CONVERGE_FAULTS_LONG=1)")
    assert cluster.local.info is not None
    index = attempt % 2
    worker = Path(cluster.local.info.data_dir) / f"worker-{index}"
    db, alias, argv = backfill.fresh()
    sizes = {log: log.stat().st_size for log in worker.glob("app-*/*/stderr")}  # earlier jobs' logs
    proc = cluster.start_jobs(argv, stderr=tmp_path / "driver.log")
    try:
        _wait_for_job(proc)
        deadline = time.monotonic() + 120
        while _rows_in(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the mapping stage writes: its tasks (and the projection's) are long
        while not (busy := running_task_on(worker, sizes)) and proc.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        running = proc.poll() is None
        cluster.local.kill_worker(index)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            cluster.kill_driver(proc)
    assert running and busy, "the backfill ended before the worker ran a task of it"
    assert proc.returncode == 0 and json.loads(out.strip().splitlines()[-1]) == [0], out
    log = (tmp_path / "driver.log").read_text()
    assert "Lost executor" in log, log[-3000:]
    assert master_state(cluster.local.info)["aliveworkers"] == 1
    assert backfill.state(db, alias) == backfill.clean


@pytest.mark.parametrize("attempt", range(5))
def test_a_driver_killed_mid_backfill_and_run_again_ends_in_the_clean_state(
    cluster: Cluster, backfill: Backfill, tries: int, attempt: int
) -> None:
    """SIGKILL to the driver's process group (Python and JVM) once its executors wrote rows: the
    store and index hold part of the backfill; the same backfill run again exits 0 with the clean
    run's rows and documents."""
    if attempt >= tries:
        pytest.skip("tries 2-5 run in the long fault suite (CONVERGE_FAULTS_LONG=1)")
    db, alias, argv = backfill.fresh()
    proc = cluster.start_jobs(argv)
    try:
        _wait_for_job(proc)
        deadline = time.monotonic() + 120
        while _rows_in(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        running = proc.poll() is None
    finally:
        cluster.kill_driver(proc)
    assert running, "the backfill ended before it wrote a row"
    partial = backfill.state(db, alias)
    assert partial != backfill.clean  # killed mid-job: the documents (at least) are not all there
    assert sum(map(len, partial["rows"].values())) > 0
    assert cluster.run_jobs(argv) == [0]
    assert backfill.state(db, alias) == backfill.clean


def test_the_event_log_keeps_every_application_for_the_history_server(
    spark_cluster: Cluster, backfill: Backfill, tries: int
) -> None:
    """Every driver of the session logged its application (Spark's rolling format: a directory an
    application, its status file ``.inprogress`` until the driver ends it, so a killed driver's
    stays so); a history server on that directory lists the completed ones."""
    logs = sorted(spark_cluster.local.event_log.glob("eventlog_v2_*"))
    status = [name for log in logs for name in (p.name for p in log.glob("appstatus_*"))]
    done = [n for n in status if not n.endswith(".inprogress")]
    assert len(status) == len(logs) and done and len(done) < len(logs), status  # the killed ones too
    port = free_port("127.0.0.1")
    argv, env = history_command(spark_cluster.local.data_dir, port)
    out = open(Path(spark_cluster.local.data_dir) / "logs" / "history.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    try:
        deadline, listed = time.monotonic() + 90, list[Any]()
        while time.monotonic() < deadline and len(listed) < len(done):
            try:
                url = f"http://127.0.0.1:{port}/api/v1/applications?status=completed"
                with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
                    listed = json.load(resp)
            except OSError:
                pass
            time.sleep(0.5)
        assert len(listed) >= len(done) and all(a["attempts"][0]["completed"] for a in listed), listed
    finally:
        stop_pid(proc.pid, 15.0, proc.wait)
