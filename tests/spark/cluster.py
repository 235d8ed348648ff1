"""The local Spark standalone cluster of the tests (``framework.local_spark``: a master and two
workers, 1 core and 1 GB each), started once a session, and a driver process that runs ``converge
spark`` jobs on it.

The jobs run in a child process (one Spark application: a process holds one Spark context, and the
pytest process holds the ``local[2]`` one): ``python -m tests.spark.cluster ARGV_JSON...`` runs each
argument list through ``framework.cli.main`` in turn on one session, whose executors start once, and
prints their exit statuses as JSON. The driver's ``spark-defaults.conf`` is the cluster's
(``LocalSpark.driver_conf``: executors of 512 MB, 4 shuffle partitions, no UI);
``CONVERGE_SHARED_PATHS`` declares the tests' temporary directory shared (the workers run on this
host), so the SQLite stores there are allowed on the cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from framework.local_spark import LocalSpark

ROOT = Path(__file__).resolve().parents[2]

#: The line the driver prints before job N: ``JOB_MARK N``.
JOB_MARK = "@@converge-job"


class Cluster:
    """A started ``LocalSpark`` and the environment of a driver that submits to it."""

    def __init__(self, local: LocalSpark) -> None:
        self.local = local

    @property
    def master(self) -> str:
        assert self.local.info is not None
        return self.local.info.master_url

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return env | {
            "SPARK_CONF_DIR": str(self.local.driver_conf),
            "CONVERGE_SHARED_PATHS": tempfile.gettempdir(),
            "CONVERGE_SPARK_MASTER": self.master,
        }

    def start_jobs(self, *argvs: Sequence[str]) -> subprocess.Popen[str]:
        """A driver process running ``argvs`` (``converge`` arguments, without ``--master``)."""
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.cluster", *(json.dumps(list(a)) for a in argvs)],
            cwd=ROOT,
            env=self.env(),
            stdout=subprocess.PIPE,
            text=True,
        )

    def run_jobs(self, *argvs: Sequence[str], timeout: float = 240) -> list[Any]:
        """Run ``argvs`` on the cluster; their exit statuses (a probe's module files)."""
        proc = self.start_jobs(*argvs)
        out, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, out
        return list(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the session; its JVMs stop at the session's end."""
    local = LocalSpark(
        tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="1g"
    )
    local.start()
    try:
        yield Cluster(local)
    finally:
        local.stop()


def _probe(app: str) -> list[str]:  # pragma: no cover - the driver process
    """Where the executors import converge and ``app``'s package from (a job's session on the master)."""
    from spark_batch.apps import load_app
    from spark_batch.session import spark_session

    load_app(app)
    spark = spark_session("converge-probe", os.environ["CONVERGE_SPARK_MASTER"], app=app)
    top = app.split(".", 1)[0]

    def files(_: object) -> list[str]:
        import importlib

        return [str(importlib.import_module(m).__file__) for m in ("framework", "spark_batch", top)]

    return sorted(set(spark.sparkContext.parallelize(range(4), 4).flatMap(files).collect()))


def _main(argvs: list[str]) -> None:  # pragma: no cover - the driver process
    """Run each ``converge`` argument list (JSON); ``["probe", APP]``: ``_probe(APP)``."""
    from framework.cli import main

    out: list[object] = []
    for n, text in enumerate(argvs):
        print(f"{JOB_MARK} {n}", flush=True)
        argv = json.loads(text)
        out.append(_probe(argv[1]) if argv[0] == "probe" else main(argv))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":  # pragma: no cover
    _main(sys.argv[1:])
