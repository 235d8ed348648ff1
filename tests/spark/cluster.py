"""The local Spark standalone cluster of the tests (``framework.local_spark``: a master and two
workers, 1 core and 1 GB each), started once a session, and a driver process that runs ``converge
spark`` jobs on it.

The jobs run in a child process (one Spark application: a process holds one Spark context, and the
pytest process holds the ``local[2]`` one): ``python -m tests.spark.cluster ARGV_JSON...`` runs each
argument list through ``framework.cli.main`` in turn on one session, whose executors start once, and
prints their exit statuses as JSON; without arguments it reads one JSON argument list a line from
stdin and answers each with a ``RESULT_MARK`` line (``Cluster.driver()``: the local and the cluster
run of each job in turn, on one cluster application). Two other steps run between jobs:
``["probe", APP]`` (where the executors import the code from) and ``["call", "MODULE:FUNCTION",
ARG...]`` (a function of the tests in the driver process, e.g. a snapshot of the store and index
after a job; its JSON result). The driver's ``spark-defaults.conf`` is the cluster's
(``LocalSpark.driver_conf``: executors of 512 MB, 4 shuffle partitions, no UI, an event log);
``CONVERGE_SHARED_PATHS`` declares the tests' temporary directory shared (the workers run on this
host), so the SQLite stores there are allowed on the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from framework.local_process import pid_alive
from framework.local_spark import LocalSpark

ROOT = Path(__file__).resolve().parents[2]

#: The line the driver prints before job N: ``JOB_MARK N``.
JOB_MARK = "@@converge-job"
#: The line an interactive driver answers a step with: ``RESULT_MARK JSON``.
RESULT_MARK = "@@converge-result"


class Driver:
    """A driver process on the cluster that runs one step at a time (``step``) until ``close``."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def step(self, argv: Sequence[str], timeout: float = 240) -> Any:
        """Run one step (a ``converge`` argument list, a probe or a call); its result."""
        self.send(argv)
        return self.result(argv, timeout)

    def send(self, argv: Sequence[str]) -> None:
        """Start one step without waiting for it (``result`` waits)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(list(argv)) + "\n")
        self.proc.stdin.flush()

    def result(self, argv: Sequence[str], timeout: float = 240) -> Any:
        """The result of the step ``send`` started (``argv``, for the message)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"the driver exited ({self.proc.poll()}) during {argv}")
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK) :])
        raise AssertionError(f"no result of {argv} in {timeout:.0f} s")

    def close(self) -> None:
        """End the driver (its Spark application)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                Cluster.kill_driver(self.proc)


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

    def start_jobs(self, *argvs: Sequence[str], stderr: Path | None = None) -> subprocess.Popen[str]:
        """A driver process running ``argvs`` (``converge`` arguments, without ``--master``), in a
        process group of its own (with its JVM: ``kill_driver``); its stderr to ``stderr`` if given."""
        err = stderr.open("w") if stderr is not None else None
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.spark.cluster", *(json.dumps(list(a)) for a in argvs)],
                cwd=ROOT,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        finally:
            if err is not None:
                err.close()

    @contextlib.contextmanager
    def driver(self) -> Iterator[Driver]:
        """An interactive driver process (``Driver.step``), ended on exit."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.cluster"],
            cwd=ROOT,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        driver = Driver(proc)
        try:
            yield driver
        finally:
            driver.close()

    @staticmethod
    def kill_driver(proc: subprocess.Popen[str]) -> None:
        """SIGKILL to the driver's process group: its Python process and its JVM at once."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def run_jobs(self, *argvs: Sequence[str], timeout: float = 300) -> list[Any]:
        """Run ``argvs`` on the cluster; their exit statuses (a probe's module files, a call's result)."""
        proc = self.start_jobs(*argvs)
        try:
            out, _ = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                self.kill_driver(proc)
        assert proc.returncode == 0, out
        return list(json.loads(out.strip().splitlines()[-1]))

    def ensure_workers(self) -> None:
        """Restart every worker whose JVM is gone (a fault test killed it); wait until all are alive."""
        info = self.local.info
        assert info is not None
        for index, pid in enumerate(info.worker_pids):
            if not pid_alive(pid):
                self.local.restart_worker(index)


#: The session's cluster, once started (``spark_cluster``).
_STARTED: list[Cluster] = []


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """One cluster for the session: started by the first module that asks (each test module imports
    this fixture, and pytest keeps a session fixture per module that defines it), its JVMs stopped
    at the process's exit (``LocalSpark`` registers that)."""
    if not _STARTED:
        local = LocalSpark(
            tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="1g"
        )
        local.start()
        _STARTED.append(Cluster(local))
    return _STARTED[0]


_TASK = re.compile(rb"(Running|Finished) task \S+ in stage \S+ \(TID (\d+)\)")


def running_task_on(worker_dir: Path, sizes: dict[Path, int]) -> bool:
    """Whether an executor of worker ``worker_dir`` runs a task now: its log, past ``sizes`` (the
    logs' sizes before), has a task started and not finished."""
    running: set[bytes] = set()
    for log in worker_dir.glob("app-*/*/stderr"):
        with log.open("rb") as f:
            f.seek(sizes.get(log, 0))
            for what, tid in _TASK.findall(f.read()):
                (running.add if what == b"Running" else running.discard)(tid)
    return bool(running)


async def store_rows(url: str, spec: str) -> dict[str, list[str]]:
    """Every row of every table of the app (and of the ID map), with its cells' values and write
    times, as sorted JSON texts per table."""
    from framework.core.schema import SchemaError
    from framework.idmutation.tables import MAP_TABLE
    from spark_batch.apps import load_app
    from stores.open import open_wide_store

    store = await open_wide_store(url)
    try:
        out: dict[str, list[str]] = {}
        for table in (*load_app(spec).tables, MAP_TABLE):
            try:
                rows = [r async for r in store.scan(table.name)]
            except SchemaError:  # a table the jobs so far have not created
                continue
            out[table.name] = sorted(
                json.dumps(
                    [r.key, {c: repr(v) for c, v in sorted(r.cells.items())}], sort_keys=True, default=str
                )
                for r in rows
            )
        return out
    finally:
        await store.close()


async def snapshot(url: str, spec: str, es_url: str, aliases: str, out: str) -> None:
    """``store_rows`` and the documents of each of the comma-separated ``aliases`` (alias: id:
    [source, version]) as JSON in ``out``."""
    from tests.spark.support import documents

    docs = {alias: await documents(es_url, alias) for alias in aliases.split(",")}
    state = {"rows": await store_rows(url, spec), "docs": docs}
    Path(out).write_text(json.dumps(state, sort_keys=True, default=str))


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


def _call(target: str, *args: str) -> object:  # pragma: no cover - the driver process
    """``MODULE:FUNCTION(*args)`` (a coroutine function is run to its end)."""
    module, name = target.split(":", 1)
    result = getattr(importlib.import_module(module), name)(*args)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def _step(argv: list[str]) -> object:  # pragma: no cover - the driver process
    from framework.cli import main

    if argv[0] == "probe":
        return _probe(argv[1])
    if argv[0] == "call":
        return _call(*argv[1:])
    return main(argv)


def _main(argvs: list[str]) -> None:  # pragma: no cover - the driver process
    """Run each ``converge`` argument list (JSON); ``["probe", APP]``: ``_probe(APP)``;
    ``["call", "MODULE:FUNCTION", ARG...]``: ``_call``. Without any: one a line from stdin."""
    if not argvs:
        for line in sys.stdin:
            print(f"{RESULT_MARK} {json.dumps(_step(json.loads(line)))}", flush=True)
        return
    out: list[object] = []
    for n, text in enumerate(argvs):
        print(f"{JOB_MARK} {n}", flush=True)
        out.append(_step(json.loads(text)))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":  # pragma: no cover
    _main(sys.argv[1:])
