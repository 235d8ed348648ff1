"""A test app: one KeyedAgent whose sink records every application in order.

Configured by environment (set by the tests that spawn it as a worker):
ORDER_TOPIC, CONVERGE_BROKER, CONVERGE_DATA_DIR, ORDER_FAIL_KEY (a key whose
writes fail transiently until the file ORDER_RELEASE exists; ``*`` for every
key), ORDER_PARK_AFTER (attempts before a lone failing key is parked) and
ORDER_SLOW_MS, ORDER_JOIN_TIMEOUT (``RuntimeConfig.group_join_timeout``).
Events of a type other than ``tick`` are bad messages (stage ``map``).
The runtime's status is written to counters.json (``tests.support.status_file``).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import faust

from framework.core.errors import BadMessage
from framework.core.events import Event
from framework.core.mutations import Mutation, Upsert
from framework.dlq import DeadLetterWAL
from framework.runtime.agent import KeyedAgent
from framework.runtime.backoff import BackoffConfig
from framework.runtime.binding import AgentRuntime, RuntimeConfig
from framework.runtime.processor import AgentProcessor
from framework.runtime.scheduler import SchedulerConfig
from framework.settings import Settings
from framework.worker.faust_app import create_faust_app
from stores.errors import TransientStoreError
from tests.support.status_file import dump_status


class OrderAgent(KeyedAgent):
    name = "order"
    topic = os.environ.get("ORDER_TOPIC", "order-in")

    def handle(self, event: Event) -> Iterable[Mutation]:
        if event.type != "tick":
            raise BadMessage(f"unknown event type {event.type!r}")
        n = event.payload["n"]
        if not isinstance(n, int):
            raise TypeError(f"payload.n must be an int, got {type(n).__name__}")
        return [Upsert("seq", {"k": event.ordering_key}, {"n": n}, event.version)]


class RecordingSink:
    """Appends (key, n, pid, at) to a SQLite table in the order writes are applied (``at``: time.time())."""

    name = "recording"

    def __init__(self, path: Path, fail_key: str | None, release: Path | None, slow_ms: int) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS applied"
            " (id INTEGER PRIMARY KEY, k TEXT, n INTEGER, pid INTEGER, at REAL)"
        )
        self._lock = threading.Lock()
        self.fail_key, self.release, self.slow = fail_key, release, slow_ms / 1000

    def _insert(self, rows: list[tuple[str, int]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT INTO applied (k, n, pid, at) VALUES (?, ?, ?, ?)",
                [(k, n, os.getpid(), time.time()) for k, n in rows],
            )

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        failing = self.fail_key in ("*", event.ordering_key)
        if failing and self.release is not None and not self.release.exists():
            raise TransientStoreError("destination refuses this key for now")
        if self.slow:
            await asyncio.sleep(self.slow)
        rows = [(str(m.key["k"]), int(m.cells["n"])) for m in mutations if isinstance(m, Upsert)]
        await asyncio.to_thread(self._insert, rows)


def build() -> faust.App:
    settings = Settings.resolve(os.environ.get("ORDER_APP_ID", "order-app"))
    app = create_faust_app(settings)
    data = settings.data_dir
    release = os.environ.get("ORDER_RELEASE")
    sink = RecordingSink(
        data / "applied.db",
        os.environ.get("ORDER_FAIL_KEY"),
        Path(release) if release else None,
        int(os.environ.get("ORDER_SLOW_MS", "0")),
    )
    config = RuntimeConfig(
        group_join_timeout=float(os.environ.get("ORDER_JOIN_TIMEOUT", "60")),
        scheduler=SchedulerConfig(
            max_concurrency=16,
            backoff=BackoffConfig(
                base_delay=0.05,
                max_delay=0.3,
                down_base_delay=0.1,
                down_max_delay=0.5,
                park_after=int(os.environ.get("ORDER_PARK_AFTER", "1000")),
            ),
        ),
    )
    agent = OrderAgent()
    processor = AgentProcessor(agent, [sink], config.sink_timeout)
    runtime = AgentRuntime(app, agent.topic, processor, DeadLetterWAL(settings.dlq_root), config)

    dump_status(app, data / "counters.json", runtime.status)
    return app
