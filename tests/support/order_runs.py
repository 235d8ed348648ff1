"""Runs of the order test app (``tests.support.order_app``) as a worker: its input and what it did."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framework.dlq import DeadLetterStore, ParkedRecord
from tests.support.status_file import read_status

__all__ = [
    "ORDER_APP",
    "tick_event",
    "tick_records",
    "applied",
    "applied_at",
    "parked",
    "wait_until",
    "order_status",
    "order_counters",
]

#: The worker spec of the order test app.
ORDER_APP = "tests.support.order_app:build"


def tick_event(key: str, n: object) -> bytes:
    """The ``n``-th event of ``key`` (version and occurred_at 1,000,000 + n when n is an int)."""
    m = n if isinstance(n, int) else 0
    return json.dumps(
        {"event_id": f"{key}-{n}", "ordering_key": key, "version": 1_000_000 + m,
         "occurred_at": 1_000_000 + m, "type": "tick", "payload": {"n": n}}
    ).encode()  # fmt: skip


def tick_records(keys: list[str], per_key: int) -> list[tuple[bytes, bytes]]:
    """Events 0..per_key-1 of every key, round robin over the keys, as (Kafka key, value)."""
    return [(k.encode(), tick_event(k, n)) for n in range(per_key) for k in keys]


def applied_at(path: Path) -> list[tuple[str, int, float]]:
    """Every application the order app's sink recorded in ``path``, in order: (key, n, time.time())."""
    if not path.exists():
        return []
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT k, n, at FROM applied ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def applied(path: Path) -> list[tuple[str, int]]:
    """Every application recorded in ``path``, in order: (key, n)."""
    return [(k, n) for k, n, _ in applied_at(path)]


def parked(data: Path) -> list[ParkedRecord]:
    """Every record in the dead-letter WAL of the worker whose data dir is ``data``."""
    return [e.record for e in DeadLetterStore(data / "dlq").ordered()]


def wait_until(pred: Callable[[], object], timeout: float, what: str, poll: float = 0.3) -> None:
    """Poll ``pred`` until it is true; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def order_status(data: Path) -> dict[str, Any]:
    """The order worker's ``AgentRuntime.status()``, dumped every 0.2 s to counters.json."""
    return read_status(data / "counters.json")


def order_counters(data: Path) -> dict[str, int]:
    """The counters of ``order_status``."""
    return order_status(data).get("counters", {})
