"""The batch layer on a real Spark standalone cluster (issue 45): a master and two worker JVMs from
pyspark's distribution (``tests/spark/cluster.py``), jobs submitted to ``spark://``.

``test_cluster_jobs.py`` runs every job of both example apps on the cluster (backfill, check,
repair, reindex, aggregate, ingest, changes, idmap, retention) and compares its store rows and
index documents with the same job's on ``local[2]``; ``test_cluster_faults.py`` kills worker JVMs
and drivers mid-job. Here: the cluster's workers, the code zip a cluster job ships
(``spark.submit.pyFiles``; the executors import from it, ``test_cluster_jobs.py`` probes), and a
SQLite store not declared shared refused before Spark starts.
"""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest

from framework.cli import main
from framework.local_spark import master_state
from spark_batch.apps import load_app
from tests.spark.cluster import Cluster, spark_cluster
from tests.spark.support import sqlite_url

__all__ = ["spark_cluster"]

APPS = {"desk": "examples.support_desk.app:app", "activity": "examples.activity_platform.app:app"}


def test_the_cluster_is_two_alive_workers(spark_cluster: Cluster) -> None:
    assert spark_cluster.local.info is not None
    state = master_state(spark_cluster.local.info)
    assert state["aliveworkers"] == 2 and {w["cores"] for w in state["workers"] if w["state"] == "ALIVE"} == {
        1
    }


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
