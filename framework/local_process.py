"""The child processes of the embedded services (noida-db, moto's S3 server, the registry
stand-in): a free port, a parent-death signal for an owned child, whether a pid still runs, a
graceful stop, and ``LocalServer``: one such server's start, readiness and stop."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

__all__ = ["free_port", "port_free", "die_with_parent", "pid_alive", "stop_pid", "LocalServer"]

_PR_SET_PDEATHSIG = 1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(host: str, port: int) -> bool:
    """Whether a server could bind ``host:port`` now (a port in TIME_WAIT counts as free)."""
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stop_pid(pid: int, timeout: float, wait: Callable[..., object] | None = None) -> None:
    """SIGINT ``pid``, then SIGKILL its process group after ``timeout``; ``wait`` is its
    ``Popen.wait`` when this process owns it (reaps it), else None (polls the pid)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wait is not None:
            try:
                wait(timeout=0.1)
                return
            except subprocess.TimeoutExpired:
                continue
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if wait is not None:
        with contextlib.suppress(Exception):
            wait(timeout=5)


class LocalServer:
    """A server in a Python process of its own on ``host``:``port`` (a free port when None),
    logging to ``log_dir/<log_name>``; started by ``start`` (which waits until ``ready_path``
    answers over HTTP), stopped by ``stop``, or used as a context manager.

    By default the server is this process's: it is stopped at interpreter exit and receives
    SIGINT from the kernel if this process dies. ``detach=True`` lets it outlive this process
    (``converge stack up``); whoever recorded its ``pid`` stops it. A subclass names the
    ``command`` and the ``ready_path``, and ``failed`` turns a message into its own error.
    """

    #: what the server is, for messages; the log file's name; the path that answers once it is up
    what, log_name, ready_path = "the server", "server.log", "/"

    def __init__(
        self, log_dir: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
        startup_timeout: float = 30.0, detach: bool = False,
    ) -> None:  # fmt: skip
        self.log_path = Path(log_dir) / self.log_name
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The server's command line (``self.host`` and ``self.port`` are set)."""
        raise NotImplementedError

    def failed(self, message: str) -> Exception:
        """The error to raise with ``message``."""
        return RuntimeError(message)

    @property
    def url(self) -> str:
        """The server's URL (``http://host:port``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs from this object, else None."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> str:
        """Start the server and wait until it answers; returns its URL."""
        if self._proc is not None:
            raise self.failed(f"{self.what} is already started")
        if self.port is not None and not port_free(self.host, self.port):
            raise self.failed(f"cannot bind the port of {self.what} {self.host}:{self.port}: in use")
        self.port = self.port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=os.setsid if self.detach else die_with_parent, close_fds=True,  # noqa: PLW1509
            )  # fmt: skip
        if not self.detach:
            atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise self.failed(f"{self.what} exited with code {code} while starting:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=2):  # noqa: S310 - loopback
                    return
            except (urllib.error.URLError, OSError) as exc:
                last = repr(exc)
            time.sleep(0.1)
        raise self.failed(f"{self.what} did not answer within {self.startup_timeout}s: {last}")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (what it held in memory is lost); the port stays this object's."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_pid(proc.pid, timeout, wait=proc.wait)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
