"""Start and stop ``converge worker`` subprocesses (the demo, benchmarks and tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from framework.local_stack import die_with_parent
from framework.settings import env_setting


def start_worker(
    app: str, data_dir: Path, broker: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Spawn a worker for ``app`` with its own data dir; its log goes to data_dir/worker.log."""
    data_dir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "CONVERGE_BROKER": broker, "CONVERGE_DATA_DIR": str(data_dir), **(env or {})}
    log = open(data_dir / "worker.log", "ab")  # noqa: SIM115 - owned by the child
    level = env_setting("loglevel", full_env) or "warning"
    return subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "worker", app, "--loglevel", level],
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - no orphan worker when the caller dies
    )


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGINT and wait; SIGKILL when it does not stop in time. Returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    return _wait_or_kill(proc, timeout)


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
    return proc.wait(10)


def stop_workers(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 30.0) -> list[int]:
    """SIGINT every worker at once (so none sees the others leave one by one), then wait for
    each, SIGKILLing those that do not stop in time. Returns the exit codes in order."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    return [_wait_or_kill(proc, timeout) for proc in procs]


def kill_worker(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker: no shutdown, no final commit."""
    proc.kill()
    proc.wait(10)
