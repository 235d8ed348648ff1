"""The embedded local stack: one ``noida-db`` process serving Kafka and Elasticsearch, and
optionally the embedded S3 server (``framework.local_s3``) with the bucket for parked segments and
the schema-registry stand-in (``framework.local_registry``) for decoders of registry formats.

Used by ``converge stack``, the demo and the tests. Each process runs in its own process
group and is stopped with SIGINT (noida-db loses its last writes on SIGKILL). An owned stack
is stopped at interpreter exit and its processes receive SIGINT from the kernel if their
parent dies; a detached one outlives its starter, with its pids and ports in a state file.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, replace
from importlib.resources import files
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.core.extras import needs_extra
from framework.local_process import die_with_parent, free_port, pid_alive, port_free, stop_pid
from framework.local_registry import LocalRegistry
from framework.local_s3 import DLQ_BUCKET, LocalS3

__all__ = ["LocalStack", "LocalStackError", "StackInfo", "free_port", "default_binary", "die_with_parent"]

_STATE_FILE = "converge-stack.json"


class LocalStackError(ConvergeError, RuntimeError):
    """The embedded stack could not be started, reached or stopped."""


@dataclass(frozen=True)
class StackInfo:
    """Where a running stack listens; ``s3_port`` and ``s3_pid`` are None without an S3 server."""

    pid: int
    host: str
    kafka_port: int
    es_port: int
    data_dir: str
    s3_port: int | None = None
    s3_pid: int | None = None
    #: the schema-registry stand-in (``framework.local_registry``), None without one
    registry_port: int | None = None
    registry_pid: int | None = None

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def es_url(self) -> str:
        return f"http://{self.host}:{self.es_port}"

    @property
    def denylist_store(self) -> str:
        """The stack's erasure deny-list of record: a SQLite file of its own, beside the broker's
        state, so it outlives every store the workers and jobs write (``CONVERGE_DENYLIST_STORE``)."""
        return f"sqlite:///{Path(self.data_dir).resolve() / 'denylist.db'}"

    @property
    def s3_endpoint(self) -> str | None:
        """The embedded S3 server's URL, or None when the stack runs without one."""
        return None if self.s3_port is None else f"http://{self.host}:{self.s3_port}"

    @property
    def registry_url(self) -> str | None:
        """The schema-registry stand-in's URL (always on loopback), or None without one."""
        return None if self.registry_port is None else f"http://127.0.0.1:{self.registry_port}"


def default_binary() -> Path:
    """The noida-db binary shipped inside the ``noida-db`` wheel (the ``stack`` extra)."""
    with needs_extra("the embedded stack"):
        return Path(str(files("noida_db").joinpath("noida-db")))


class LocalStack:
    """Start, probe and stop one noida-db process with Kafka and Elasticsearch.

    ``with LocalStack(data_dir) as stack:`` starts it on free loopback ports and
    stops it on exit. ``s3=True`` also starts the embedded S3 server (moto, in memory) on
    ``s3_port`` and creates the bucket ``DLQ_BUCKET``. ``detach=True`` keeps them alive after
    this process ends (for ``converge stack up``); their pids and ports go to a state file in
    ``data_dir``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        kafka_port: int | None = None,
        es_port: int | None = None,
        binary: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
        detach: bool = False,
        s3: bool = False,
        s3_port: int | None = None,
        registry: bool = False,
        registry_port: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.kafka_port = kafka_port
        self.es_port = es_port
        self.binary = Path(binary) if binary is not None else default_binary()
        self.startup_timeout = startup_timeout
        self.detach = detach
        self.s3 = s3
        self.s3_port = s3_port
        self._proc: subprocess.Popen[bytes] | None = None
        self._s3: LocalS3 | None = None
        self.registry = registry
        self.registry_port = registry_port
        self._registry: LocalRegistry | None = None
        self.info: StackInfo | None = None

    # -- lifecycle -----------------------------------------------------
    def start(self) -> StackInfo:
        """Start noida-db (and the S3 server) and wait until every protocol answers."""
        if self._proc is not None:
            raise LocalStackError("stack already started")
        if not self.binary.is_file():
            raise LocalStackError(
                f"noida-db binary not found at {self.binary}; install it with "
                "'pip install noida-db' or pass binary=<path>"
            )
        if not os.access(self.binary, os.X_OK):
            with contextlib.suppress(OSError):
                self.binary.chmod(0o755)
        kafka_port = self.kafka_port or free_port(self.host)
        es_port = self.es_port or free_port(self.host)
        for name, port in (("kafka", kafka_port), ("elasticsearch", es_port)):
            if not port_free(self.host, port):
                raise LocalStackError(f"cannot bind {name} port {self.host}:{port}: in use")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.data_dir / "noida-db.log"
        cmd = [
            str(self.binary), "start",
            "--data-dir", str(self.data_dir),
            "--host", self.host,
            "--only", "kafka,elasticsearch",
            "--kafka-port", str(kafka_port),
            "--elasticsearch-port", str(es_port),
        ]  # fmt: skip
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=os.setsid if self.detach else die_with_parent,  # noqa: PLW1509
                close_fds=True,
            )
        self.info = StackInfo(self._proc.pid, self.host, kafka_port, es_port, str(self.data_dir))
        if not self.detach:
            atexit.register(self.stop)
        try:
            self._wait_ready(log_path)
            if self.s3:
                self.info = self._start_s3(self.info)
            if self.registry:
                self.info = self._start_registry(self.info)
        except BaseException:
            self.stop()
            raise
        if self.detach:
            _write_state(self.data_dir, self.info)
        return self.info

    def _start_s3(self, info: StackInfo) -> StackInfo:
        """``info`` with the S3 server started, or kept when one recorded in the state file still
        runs (its objects live only in its memory: a restart must not lose them)."""
        before = _load_state(self.data_dir) if self.detach else None
        if before is not None and before.s3_pid is not None and pid_alive(before.s3_pid):
            return replace(info, s3_port=before.s3_port, s3_pid=before.s3_pid)
        self._s3 = LocalS3(
            self.data_dir, host=self.host, port=self.s3_port, startup_timeout=self.startup_timeout,
            detach=self.detach,
        )  # fmt: skip
        self._s3.start()
        self._s3.ensure_bucket(DLQ_BUCKET)
        return replace(info, s3_port=self._s3.port, s3_pid=self._s3.pid)

    def _start_registry(self, info: StackInfo) -> StackInfo:
        """``info`` with the schema-registry stand-in started, or kept when one recorded in the state
        file still runs (its schemas live only in its memory)."""
        before = _load_state(self.data_dir) if self.detach else None
        if before is not None and before.registry_pid is not None and pid_alive(before.registry_pid):
            return replace(info, registry_port=before.registry_port, registry_pid=before.registry_pid)
        self._registry = LocalRegistry(
            self.data_dir, port=self.registry_port, startup_timeout=self.startup_timeout, detach=self.detach
        )
        self._registry.start()
        return replace(info, registry_port=self._registry.port, registry_pid=self._registry.pid)

    def _wait_ready(self, log_path: Path) -> None:
        assert self._proc is not None and self.info is not None
        deadline = time.monotonic() + self.startup_timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise LocalStackError(f"noida-db exited with code {code} while starting:\n{tail}")
            try:
                es_ready(self.info.es_url)
                kafka_ready(self.info.kafka_bootstrap)
                return
            except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
                last_error = repr(exc)
            time.sleep(0.2)
        raise LocalStackError(f"noida-db did not become ready within {self.startup_timeout}s: {last_error}")

    def stop(self, timeout: float = 15.0) -> None:
        """Stop with SIGINT (so recent writes are saved); SIGKILL the group after ``timeout``.
        The S3 server started here stops too (its objects are lost)."""
        s3, self._s3 = self._s3, None
        if s3 is not None:
            s3.stop(timeout)
        registry, self._registry = self._registry, None
        if registry is not None:
            registry.stop(timeout)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        stop_pid(proc.pid, timeout, wait=proc.wait)

    def restart(self) -> StackInfo:
        """Stop gracefully and start again on the same ports and data (noida-db forgets dead
        consumers); an S3 server starts again empty."""
        if self.info is not None:
            self.kafka_port, self.es_port = self.info.kafka_port, self.info.es_port
            self.s3_port, self.registry_port = self.info.s3_port, self.info.registry_port
        self.stop()
        return self.start()

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- detached stacks (``converge stack``) ----------------------------
    @staticmethod
    def read_state(data_dir: str | os.PathLike[str]) -> StackInfo | None:
        """The detached stack recorded in ``data_dir``, if its noida-db still runs.

        When noida-db is gone the state file is removed, unless the stack's S3 server still runs:
        it holds the uploaded segments in memory, so only ``stop_detached`` stops it, and a new
        ``start`` with ``s3`` keeps it.
        """
        info = _load_state(data_dir)
        if info is None or pid_alive(info.pid):
            return info
        if not any(pid is not None and pid_alive(pid) for pid in (info.s3_pid, info.registry_pid)):
            (Path(data_dir) / _STATE_FILE).unlink(missing_ok=True)
        return None

    @staticmethod
    def stop_detached(data_dir: str | os.PathLike[str], timeout: float = 15.0) -> bool:
        """Stop the detached stack of ``data_dir`` and its S3 server; False when neither runs."""
        info = _load_state(data_dir)
        if info is None:
            return False
        pids = (info.registry_pid, info.s3_pid, info.pid)
        running = [pid for pid in pids if pid is not None and pid_alive(pid)]
        for pid in running:
            stop_pid(pid, timeout)
        (Path(data_dir) / _STATE_FILE).unlink(missing_ok=True)
        return bool(running)

    @staticmethod
    def restart_detached(data_dir: str | os.PathLike[str], timeout: float = 15.0) -> StackInfo:
        """Stop the detached noida-db of ``data_dir`` gracefully and start it again on the same
        host, ports and data (``converge stack restart``); its S3 server runs on with its
        objects. LocalStackError when none runs."""
        info = LocalStack.read_state(data_dir)
        if info is None:
            raise LocalStackError(f"no stack runs from {data_dir} (start one with: converge stack up)")
        stop_pid(info.pid, timeout)
        deadline = time.monotonic() + timeout
        while not all(port_free(info.host, p) for p in (info.kafka_port, info.es_port)):
            if time.monotonic() > deadline:
                raise LocalStackError(f"ports {info.kafka_port}, {info.es_port} stayed in use after the stop")
            time.sleep(0.1)
        stack = LocalStack(
            info.data_dir, host=info.host, kafka_port=info.kafka_port, es_port=info.es_port, detach=True,
            s3=info.s3_port is not None, s3_port=info.s3_port,
            registry=info.registry_port is not None, registry_port=info.registry_port,
        )  # fmt: skip
        return stack.start()


def _load_state(data_dir: str | os.PathLike[str]) -> StackInfo | None:
    path = Path(data_dir) / _STATE_FILE
    return StackInfo(**json.loads(path.read_text())) if path.is_file() else None


def _write_state(data_dir: Path, info: StackInfo) -> None:
    (data_dir / _STATE_FILE).write_text(json.dumps(asdict(info)))


def es_ready(url: str, timeout: float = 2.0) -> dict[str, object]:
    """``GET /`` on the Elasticsearch port; raises when it does not answer."""
    with urllib.request.urlopen(url + "/", timeout=timeout) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())


def kafka_ready(bootstrap: str, timeout: float = 5.0) -> None:
    """Ask the broker for cluster metadata; raises when it does not answer."""
    import asyncio

    from aiokafka import AIOKafkaClient

    from framework.core.sync import run_sync

    async def probe() -> None:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
        try:
            await asyncio.wait_for(client.bootstrap(), timeout)
            await asyncio.wait_for(client.fetch_all_metadata(), timeout)
        finally:
            await client.close()

    run_sync(probe())
