"""Runs of the reference platform on one noida-db: workers of one group, a generated history,
and the outcome against the oracle."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.event_types import topic_of
from examples.activity_platform.app import app
from examples.activity_platform.history import History
from examples.demo import check_convergence
from framework.core.events import Event
from framework.dlq import DeadLetterStore, ParkedRecord
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker
from tests.support.status_file import read_status

__all__ = ["REFERENCE_WORKER", "ReferenceRun", "Outcome"]

#: The reference app's worker, dumping its status (``tests.support.reference_worker``).
REFERENCE_WORKER = "tests.support.reference_worker:build"


@dataclass(frozen=True)
class Outcome:
    """The stored state against the oracle: entities lost and divergent, the first differences."""

    lost: int
    divergent: int
    examples: tuple[str, ...]


class ReferenceRun:
    """Workers of the reference app in one consumer group on ``stack``, sharing one SQLite store
    under ``work``; each worker has its own data dir ``work/<name>``."""

    def __init__(self, stack: LocalStack, work: Path, app_id: str = "faults", partitions: int = 4) -> None:
        assert stack.info is not None
        self.stack, self.work, self.app_id = stack, work, app_id
        self.broker = f"kafka://{stack.info.kafka_bootstrap}"
        self.store_url = f"sqlite:///{work / 'wide.db'}"
        self.env = {
            "CONVERGE_WIDE_STORE": self.store_url,
            "CONVERGE_ES_URL": stack.info.es_url,
            "CONVERGE_ES_TOMBSTONES": "document",
            "CONVERGE_APP_ID": app_id,
            "CONVERGE_PARTITIONS": str(partitions),
        }
        self.topics = tuple(app.topics())
        self.names: list[str] = []
        self.produced = 0
        asyncio.run(ensure_topics(self.broker, {t: partitions for t in self.topics}))

    def produce(self, events: Sequence[Event]) -> None:
        """Produce ``events`` in their order, each to its topic, keyed by its ordering key."""
        by_topic: dict[str, list[tuple[bytes, bytes]]] = {}
        for e in events:
            by_topic.setdefault(topic_of(e.type), []).append((e.ordering_key.encode(), e.to_json()))
        for topic, records in by_topic.items():
            asyncio.run(produce(self.broker, topic, records))
        self.produced += len(events)

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """Start a worker with data dir ``work/<name>`` (its log: ``worker.log`` there)."""
        if name not in self.names:
            self.names.append(name)
        return start_worker(REFERENCE_WORKER, self.work / name, self.broker, self.env)

    def status(self, name: str, proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
        """The runtimes' status last dumped by worker ``name`` (by process ``proc`` when given)."""
        status = read_status(self.work / name / "status.json", None if proc is None else proc.pid)
        return status.get("runtimes", {})

    def verify(self, name: str, proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any] | None:
        """The change verifier's figures last dumped by worker ``name`` (None: it runs none)."""
        found: dict[str, Any] | None = read_status(
            self.work / name / "status.json", None if proc is None else proc.pid
        ).get("verify")
        return found

    def counter(self, name: str, counter: str, proc: subprocess.Popen[bytes] | None = None,
                *, projector: bool | None = None) -> int:  # fmt: skip
        """A counter of worker ``name`` summed over its runtimes (only the projector's when
        ``projector`` is True, only the agents' when False)."""
        total = 0
        for runtime, status in self.status(name, proc).items():
            if projector is None or runtime.startswith("project.") == projector:
                total += int(status.get("counters", {}).get(counter, 0))
        return total

    def wait_processed(self, name: str, proc: subprocess.Popen[bytes], at_least: int, timeout: float,
                       *, projector: bool | None = None) -> int:  # fmt: skip
        """Wait until worker ``name`` (process ``proc``) processed ``at_least`` events or died;
        its processed count. AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (done := self.counter(name, "processed", proc, projector=projector)) < at_least:
            if proc.poll() is not None:
                return done
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} processed {done} < {at_least} events in {timeout}s")
            time.sleep(0.05)
        return done

    def drain(self, timeout: float) -> bool:
        """Wait until the group committed the end of every topic, agents' topics first."""
        deadline = time.monotonic() + timeout
        for topic in self.topics:
            left = deadline - time.monotonic()
            if left <= 0 or not asyncio.run(wait_drained(self.broker, self.app_id, topic, left)):
                return False
        return True

    def parked(self) -> list[ParkedRecord]:
        """Every record in the dead-letter WALs of this run's workers."""
        return [e.record for n in self.names for e in DeadLetterStore(self.work / n / "dlq").ordered()]

    def outcome(self, history: History, exclude: Collection[str] = ()) -> Outcome:
        """The store and the index against the oracle of ``history``, but for the rows and
        documents of the hubs in ``exclude`` (changed past the framework, checked by the test)."""
        assert self.stack.info is not None
        checked = asyncio.run(check_convergence(history, self.store_url, self.stack.info.es_url))
        divergences = [d for d in checked.divergences if _hub(d.key) not in exclude]
        lost = {(d.table, d.key) for d in divergences if d.field is None and d.actual is None}
        divergent = {(d.table, d.key) for d in divergences} - lost
        return Outcome(len(lost), len(divergent), tuple(str(d) for d in divergences[:10]))

    def log_tail(self, name: str, chars: int = 3000) -> str:
        """The end of worker ``name``'s log."""
        path = self.work / name / "worker.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def _hub(key: Hashable) -> Hashable:
    """The hub a divergence's key names: the key, or its first part."""
    return key[0] if isinstance(key, tuple) and key else key
