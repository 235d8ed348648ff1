"""The embedded local stack: one ``noida-db`` process serving Kafka and Elasticsearch.

Used by the demo and the tests. The process runs in its own process group, is
stopped with SIGINT (noida-db loses its last writes on SIGKILL), is stopped at
interpreter exit, and receives SIGINT from the kernel if its parent dies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from framework.core.errors import ConvergeError
from framework.core.extras import needs_extra

__all__ = ["LocalStack", "LocalStackError", "StackInfo", "free_port", "default_binary", "die_with_parent"]

_PR_SET_PDEATHSIG = 1
_STATE_FILE = "converge-stack.json"


class LocalStackError(ConvergeError, RuntimeError):
    """The embedded stack could not be started, reached or stopped."""


@dataclass(frozen=True)
class StackInfo:
    """Where a running stack listens."""

    pid: int
    host: str
    kafka_port: int
    es_port: int
    data_dir: str

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def es_url(self) -> str:
        return f"http://{self.host}:{self.es_port}"


def default_binary() -> Path:
    """The noida-db binary shipped inside the ``noida-db`` wheel (the ``stack`` extra)."""
    with needs_extra("the embedded stack"):
        return Path(str(files("noida_db").joinpath("noida-db")))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Child ``preexec_fn``: own session, and SIGINT from the kernel when the parent dies."""
    os.setsid()
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


class LocalStack:
    """Start, probe and stop one noida-db process with Kafka and Elasticsearch.

    ``with LocalStack(data_dir) as stack:`` starts it on free loopback ports and
    stops it on exit. ``detach=True`` keeps it alive after this process ends
    (for ``converge stack up``); its pid and ports go to a state file in
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
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.kafka_port = kafka_port
        self.es_port = es_port
        self.binary = Path(binary) if binary is not None else default_binary()
        self.startup_timeout = startup_timeout
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None
        self.info: StackInfo | None = None

    # -- lifecycle -----------------------------------------------------
    def start(self) -> StackInfo:
        """Start noida-db and wait until both protocols answer."""
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
            if not _port_free(self.host, port):
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
        except BaseException:
            self.stop()
            raise
        if self.detach:
            (self.data_dir / _STATE_FILE).write_text(json.dumps(self.info.__dict__))
        return self.info

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
        raise LocalStackError(
            f"noida-db did not become ready within {self.startup_timeout}s: {last_error}"
        )

    def stop(self, timeout: float = 15.0) -> None:
        """Stop with SIGINT (so recent writes are saved); SIGKILL the group after ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        _stop_pid(proc.pid, timeout, wait=proc.wait)

    def restart(self) -> StackInfo:
        """Stop gracefully and start again on the same ports and data (noida-db forgets dead consumers)."""
        if self.info is not None:
            self.kafka_port, self.es_port = self.info.kafka_port, self.info.es_port
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
        """The detached stack recorded in ``data_dir``, if its process still runs."""
        path = Path(data_dir) / _STATE_FILE
        if not path.is_file():
            return None
        info = StackInfo(**json.loads(path.read_text()))
        try:
            os.kill(info.pid, 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            return None
        return info

    @staticmethod
    def stop_detached(data_dir: str | os.PathLike[str], timeout: float = 15.0) -> bool:
        """Stop the detached stack of ``data_dir``; False when none runs."""
        info = LocalStack.read_state(data_dir)
        if info is None:
            return False
        _stop_pid(info.pid, timeout, wait=None)
        (Path(data_dir) / _STATE_FILE).unlink(missing_ok=True)
        return True

    @staticmethod
    def restart_detached(data_dir: str | os.PathLike[str], timeout: float = 15.0) -> StackInfo:
        """Stop the detached stack of ``data_dir`` gracefully and start it again on the same host,
        ports and data (``converge stack restart``); LocalStackError when none runs."""
        info = LocalStack.read_state(data_dir)
        if info is None:
            raise LocalStackError(f"no stack runs from {data_dir} (start one with: converge stack up)")
        LocalStack.stop_detached(data_dir, timeout)
        deadline = time.monotonic() + timeout
        while not all(_port_free(info.host, p) for p in (info.kafka_port, info.es_port)):
            if time.monotonic() > deadline:
                raise LocalStackError(f"ports {info.kafka_port}, {info.es_port} stayed in use after the stop")
            time.sleep(0.1)
        stack = LocalStack(
            info.data_dir, host=info.host, kafka_port=info.kafka_port, es_port=info.es_port, detach=True
        )
        return stack.start()


def _stop_pid(pid: int, timeout: float, wait: object) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(wait):
            try:
                wait(timeout=0.1)
                return
            except subprocess.TimeoutExpired:
                continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if callable(wait):
        with contextlib.suppress(Exception):
            wait(timeout=5)


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
