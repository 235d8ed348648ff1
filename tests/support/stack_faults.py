"""Faults of the embedded stack: one noida-db service stopped and started alone, on its data."""

from __future__ import annotations

import subprocess
import time

from framework.local_stack import LocalStack, es_ready

__all__ = ["stop_service", "start_service", "index_answers"]


def _noida(stack: LocalStack, command: str, service: str) -> None:
    out = subprocess.run(
        [str(stack.binary), command, service, "--data-dir", str(stack.data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"noida-db {command} {service}: exit {out.returncode}: {out.stdout}{out.stderr}")


def stop_service(stack: LocalStack, service: str) -> None:
    """``noida-db stop SERVICE``: the service stops, its data is kept, the others keep running."""
    _noida(stack, "stop", service)


def start_service(stack: LocalStack, service: str, timeout: float = 30.0) -> None:
    """``noida-db start SERVICE`` on the running stack; for Elasticsearch, wait until it answers."""
    _noida(stack, "start", service)
    deadline = time.monotonic() + timeout
    while service == "elasticsearch" and not index_answers(stack):
        if time.monotonic() > deadline:
            raise RuntimeError(f"elasticsearch did not answer within {timeout}s of its start")
        time.sleep(0.1)


def index_answers(stack: LocalStack) -> bool:
    """True when the stack's Elasticsearch answers ``GET /``."""
    assert stack.info is not None
    try:
        es_ready(stack.info.es_url, timeout=1.0)
    except OSError:
        return False
    return True
