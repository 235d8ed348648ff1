"""A local Spark standalone cluster: one master and its workers, each its own JVM started from
pyspark's own distribution (``spark-class``), bound to one address (loopback by default).

Used by ``converge stack up --spark`` and the tests of the batch layer on a cluster. The workers
run with a scrubbed environment (no ``PYTHONPATH``, their own empty ``SPARK_CONF_DIR``), so a job
reaches the project's code on the executors only as it would on a remote cluster: through the
Python files it ships. Each JVM runs in its own process group (a worker's executors in its group);
an owned cluster is stopped at interpreter exit, a detached one outlives its starter with its pids
and ports in a state file.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from framework.core.errors import ConvergeError
from framework.local_process import die_with_parent, free_port, pid_alive, stop_pid

__all__ = [
    "LocalSpark",
    "LocalSparkError",
    "SparkClusterInfo",
    "driver_conf",
    "event_log_dir",
    "history_command",
    "master_state",
    "spark_home",
]

_STATE_FILE = "converge-spark.json"
_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


class LocalSparkError(ConvergeError, RuntimeError):
    """The local Spark cluster could not be started, reached or stopped."""


@dataclass(frozen=True)
class SparkClusterInfo:
    """Where a running cluster listens: the master's RPC and web UI ports and every JVM's pid."""

    host: str
    port: int
    webui_port: int
    master_pid: int
    worker_pids: tuple[int, ...]
    data_dir: str
    worker_webui_ports: tuple[int, ...] = field(default=())

    @property
    def master_url(self) -> str:
        """The URL jobs are submitted to (``--master``)."""
        return f"spark://{self.host}:{self.port}"

    @property
    def json_url(self) -> str:
        """The master's state as JSON (workers, applications)."""
        return f"http://{self.host}:{self.webui_port}/json/"


def spark_home() -> Path:
    """pyspark's own Spark distribution (its ``bin/spark-class`` and ``jars``)."""
    spec = find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise LocalSparkError("pyspark is not installed (pip install 'converge[spark]')")
    return Path(next(iter(spec.submodule_search_locations)))


def driver_conf(data_dir: str | Path) -> Path:
    """The ``SPARK_CONF_DIR`` of the drivers of the cluster in ``data_dir``."""
    return Path(data_dir).resolve() / "driver-conf"


def event_log_dir(data_dir: str | Path) -> Path:
    """The event log directory of the drivers of the cluster in ``data_dir`` (``spark.eventLog.dir``)."""
    return Path(data_dir).resolve() / "events"


def history_command(data_dir: str | Path, port: int = 18080) -> tuple[list[str], dict[str, str]]:
    """The command (and its environment's additions) of a Spark history server that shows the
    applications logged in ``event_log_dir(data_dir)``, its web UI and REST API on ``port``."""
    opts = (
        f"-Dspark.history.fs.logDirectory={event_log_dir(data_dir).as_uri()} "
        f"-Dspark.history.ui.port={port} -Dspark.history.fs.update.interval=1s"
    )
    return (
        [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.history.HistoryServer"],
        {"SPARK_HOME": str(spark_home()), "SPARK_HISTORY_OPTS": opts},
    )


def master_state(info: SparkClusterInfo, timeout: float = 2.0) -> dict[str, Any]:
    """The master's ``/json`` document."""
    with urllib.request.urlopen(info.json_url, timeout=timeout) as resp:  # noqa: S310 - loopback
        return dict(json.load(resp))


class LocalSpark:
    """Start, probe and stop a Spark standalone master with ``workers`` workers.

    ``with LocalSpark(data_dir) as cluster:`` starts it on free ports of ``host`` and stops it on
    exit; ``start()`` returns once every worker registered with the master. Each worker offers
    ``worker_cores`` cores and ``worker_memory`` to executors; ``daemon_memory`` is the heap of the
    master's and workers' own JVMs. ``driver_conf`` holds a ``spark-defaults.conf`` for the drivers
    that submit to it (``SPARK_CONF_DIR``; ``converge stack env`` exports it): executors of
    ``executor_memory`` and ``worker_cores``, shuffles of two partitions a core, no driver UI, and
    every application's event log in ``event_log`` (a history server reads it: ``history_command``).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        webui_port: int | None = None,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        executor_memory: str = "512m",
        detach: bool = False,
        start_timeout: float = 90.0,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host, self.workers = host, workers
        self.port, self.webui_port = port, webui_port
        self.worker_cores, self.worker_memory, self.daemon_memory = worker_cores, worker_memory, daemon_memory
        self.executor_memory = executor_memory
        self.detach, self.start_timeout = detach, start_timeout
        self.info: SparkClusterInfo | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> SparkClusterInfo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- starting -------------------------------------------------------------------------------

    @property
    def driver_conf(self) -> Path:
        """The drivers' ``SPARK_CONF_DIR`` (written at ``start``)."""
        return driver_conf(self.data_dir)

    @property
    def event_log(self) -> Path:
        """Where the drivers of ``driver_conf`` write their applications' event logs."""
        return event_log_dir(self.data_dir)

    def _write_driver_conf(self) -> None:
        cores = self.workers * self.worker_cores
        defaults = {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(self.worker_cores),
            "spark.sql.shuffle.partitions": str(2 * cores),
            "spark.default.parallelism": str(cores),
            "spark.ui.enabled": "false",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.event_log.as_uri(),
        }
        self.event_log.mkdir(parents=True, exist_ok=True)
        self.driver_conf.mkdir(parents=True, exist_ok=True)
        (self.driver_conf / "spark-defaults.conf").write_text(
            "".join(f"{k} {v}\n" for k, v in defaults.items())
        )

    def _env(self) -> dict[str, str]:
        home = spark_home()
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_"))}
        return env | {
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_LOG_DIR": str(self.data_dir / "logs"),
            "SPARK_LOCAL_DIRS": str(self.data_dir / "local"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
        }

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
            raise LocalSparkError("no Java: Spark needs a JVM (java on PATH or JAVA_HOME)")
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self._env(),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=self.detach,
                preexec_fn=None if self.detach else die_with_parent,
            )
        finally:
            log.close()
        self._procs[proc.pid] = proc
        return proc

    def _start_worker(self, index: int) -> tuple[int, int]:
        assert self.info is not None
        webui = free_port(self.host)
        work = self.data_dir / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        proc = self._spawn(
            f"worker-{index}", _WORKER, "--host", self.host, "--webui-port", str(webui),
            "--cores", str(self.worker_cores), "--memory", self.worker_memory, "--work-dir", str(work),
            self.info.master_url,
        )  # fmt: skip
        return proc.pid, webui

    def start(self) -> SparkClusterInfo:
        """Start the master, then the workers; wait until every worker is registered and alive."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_driver_conf()
        port, webui = self.port or free_port(self.host), self.webui_port or free_port(self.host)
        master = self._spawn(
            "master", _MASTER, "--host", self.host, "--port", str(port), "--webui-port", str(webui)
        )
        self.info = SparkClusterInfo(self.host, port, webui, master.pid, (), str(self.data_dir))
        if not self.detach:
            atexit.register(self.stop)
        try:
            self._wait(0)
            started = [self._start_worker(i) for i in range(self.workers)]
            self.info = replace(
                self.info,
                worker_pids=tuple(pid for pid, _ in started),
                worker_webui_ports=tuple(ui for _, ui in started),
            )
            self._wait(self.workers)
        except BaseException:
            self.stop()
            raise
        if self.detach:
            (self.data_dir / _STATE_FILE).write_text(json.dumps(asdict(self.info)))
        return self.info

    def _wait(self, workers: int) -> dict[str, Any]:
        """The master's state once it answers with ``workers`` alive workers."""
        assert self.info is not None
        deadline = time.monotonic() + self.start_timeout
        last: object = None
        while time.monotonic() < deadline:
            for pid in (self.info.master_pid, *self.info.worker_pids):
                if not pid_alive(pid):
                    raise LocalSparkError(f"a Spark JVM (pid {pid}) exited; see {self.data_dir / 'logs'}")
            try:
                state = master_state(self.info)
                if int(state.get("aliveworkers", 0)) >= workers:
                    return state
                last = f"{state.get('aliveworkers')} of {workers} workers alive"
            except OSError as exc:
                last = exc
            time.sleep(0.3)
        raise LocalSparkError(f"the Spark cluster did not come up in {self.start_timeout:.0f} s: {last}")

    # -- faults and stopping --------------------------------------------------------------------

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to worker ``index``'s JVM (SIGKILL: a crashed machine); its pid."""
        assert self.info is not None
        pid = self.info.worker_pids[index]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        return pid

    def restart_worker(self, index: int) -> SparkClusterInfo:
        """Stop worker ``index`` (whatever state it is in) and start a new one in its place; wait
        until all workers are alive again."""
        assert self.info is not None
        self._stop_one(self.info.worker_pids[index])
        pid, webui = self._start_worker(index)
        pids, uis = list(self.info.worker_pids), list(self.info.worker_webui_ports)
        pids[index], uis[index] = pid, webui
        self.info = replace(self.info, worker_pids=tuple(pids), worker_webui_ports=tuple(uis))
        self._wait(self.workers)
        return self.info

    def _stop_one(self, pid: int) -> None:
        proc = self._procs.pop(pid, None)
        stop_pid(pid, 15.0, proc.wait if proc is not None else None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # executors and Python workers left in its group

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master."""
        info, self.info = self.info, None
        if info is None:
            return
        for pid in (*info.worker_pids, info.master_pid):
            self._stop_one(pid)
        with contextlib.suppress(FileNotFoundError):
            (Path(info.data_dir) / _STATE_FILE).unlink()

    # -- a detached cluster ---------------------------------------------------------------------

    @staticmethod
    def read_state(data_dir: str | Path) -> SparkClusterInfo | None:
        """The detached cluster started from ``data_dir`` when its master still runs, else None."""
        path = Path(data_dir) / _STATE_FILE
        try:
            raw = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        raw["worker_pids"] = tuple(raw["worker_pids"])
        raw["worker_webui_ports"] = tuple(raw.get("worker_webui_ports", ()))
        info = SparkClusterInfo(**raw)
        return info if pid_alive(info.master_pid) else None

    @staticmethod
    def stop_detached(data_dir: str | Path) -> bool:
        """Stop the detached cluster of ``data_dir``; False when none runs."""
        info = LocalSpark.read_state(data_dir)
        if info is None:
            with contextlib.suppress(FileNotFoundError):
                (Path(data_dir) / _STATE_FILE).unlink()
            return False
        cluster = LocalSpark(info.data_dir, host=info.host)
        cluster.info = info
        cluster.stop()
        return True
