"""The child processes of the embedded services (noida-db, moto's S3 server): a free port, a
parent-death signal for an owned child, whether a pid still runs, and a graceful stop."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["free_port", "port_free", "die_with_parent", "pid_alive", "stop_pid"]

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
