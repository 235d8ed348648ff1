"""Index outages of both example apps: the group's commits of the projectors' change topics,
sampled to time each partition's recovery, and runs of the support desk's worker.

``CommitWatch`` reads the group's committed offsets and the log ends of some topics every
``every`` s in a thread of its own (clients that never join the group); ``recovery(since)``
gives, per partition with unfinished records at ``since``, the seconds until its commit first
moved after it. ``DeskRun`` is the support desk's counterpart of ``ReferenceRun``: one worker on
the test's noida-db and SQLite store, a generated history, and its divergences from the oracle.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.dlq import DeadLetterStore, ParkedRecord
from framework.kafka_admin import ensure_topics, produce, wait_all_drained
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker
from tests.examples.support_desk.compare import divergences, read_run
from tests.support.stack_faults import start_service

__all__ = ["CommitWatch", "DeskRun", "RECOVERY_BOUND", "DESK"]

#: Issue 43: every indexer partition commits again within this many seconds of the index answering.
RECOVERY_BOUND = 5.0
DESK = "examples.support_desk.app:app"

Offsets = dict[str, int]  # "topic[partition]" -> offset


class CommitWatch:
    """The committed offsets of ``group`` on ``topics`` and their log ends, sampled in a thread."""

    def __init__(self, broker: str, group: str, topics: Sequence[str], every: float = 0.2) -> None:
        self.bootstrap = broker.removeprefix("kafka://")
        self.group, self.topics, self.every = group, list(topics), every
        self.samples: list[tuple[float, Offsets, Offsets]] = []  # (time, committed, ends)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> CommitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(10)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(await self._sample())
            except Exception as exc:  # noqa: BLE001 - a sample missed; the next one counts
                self.error = exc
            await asyncio.sleep(self.every)

    async def _sample(self) -> tuple[float, Offsets, Offsets]:
        """One sample, through a client of its own (one kept for the whole run was seen to
        answer stale commits of a group that formed after it started)."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        try:
            tps: list[TopicPartition] = []
            for topic in self.topics:
                parts = consumer.partitions_for_topic(topic)
                if parts is None:
                    await consumer._client.force_metadata_update()  # noqa: SLF001 - fresh metadata
                    parts = consumer.partitions_for_topic(topic) or set()
                tps += [TopicPartition(topic, p) for p in sorted(parts)]
            committed = {_name(tp): (await consumer.committed(tp)) or 0 for tp in tps}
            ends = {_name(tp): e for tp, e in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()
        return time.monotonic(), committed, ends

    def wait_recovered(self, since: float, timeout: float = RECOVERY_BOUND + 1.0) -> dict[str, float | None]:
        """``recovery(since)`` once every partition behind at ``since`` moved, or ``timeout``
        seconds after ``since``."""
        while None in (found := self.recovery(since)).values() and time.monotonic() < since + timeout:
            time.sleep(self.every / 2)
        return found

    def recovery(self, since: float) -> dict[str, float | None]:
        """Per partition whose commit was behind its log end at ``since``: the seconds from
        ``since`` until a sample saw its commit move (None: it never moved)."""
        before = [s for s in self.samples if s[0] <= since]
        assert before, "no sample of the commits before the index came back"
        _, committed, ends = before[-1]
        out: dict[str, float | None] = {}
        for part, at in committed.items():
            if at >= ends.get(part, 0):
                continue  # nothing unfinished: not stuck
            moved = [t for t, c, _ in self.samples if t > since and c.get(part, 0) > at]
            out[part] = round(moved[0] - since, 2) if moved else None
        return out


class DeskRun:
    """A support desk worker (data dir ``work/w``) on ``stack`` with a generated history."""

    def __init__(self, stack: LocalStack, work: Path, seed: int, tickets: int) -> None:
        assert stack.info is not None
        self.stack, self.work = stack, work
        self.app_id = f"support-desk-{uuid.uuid4().hex[:8]}"
        self.tenants = (f"{self.app_id}-east", f"{self.app_id}-west")
        self.history = generate_history(seed, tickets, self.tenants)
        self.arrival = deliver(self.history.events, seed)
        self.broker = f"kafka://{stack.info.kafka_bootstrap}"
        self.store_url = f"sqlite:///{(work / 'wide.db').resolve()}"
        self.topics = list(desk_app.topics())
        self.index_topics = [desk_app.change_topic(p) for p in desk_app.projections]
        asyncio.run(ensure_topics(self.broker, dict.fromkeys(self.topics, 4)))
        self.env = {"CONVERGE_ES_URL": stack.info.es_url, "CONVERGE_ES_TOMBSTONES": "document",
                    "CONVERGE_APP_ID": self.app_id, "CONVERGE_WIDE_STORE": self.store_url,
                    "CONVERGE_PARTITIONS": "4"}  # fmt: skip

    def start(self) -> subprocess.Popen[bytes]:
        return start_worker(DESK, self.work / "w", self.broker, self.env)

    def produce(self, events: Sequence[Any]) -> None:
        """``events`` topic by topic (their order kept within each topic)."""

        async def send() -> None:
            for topic, evs in by_topic(list(events)).items():
                await produce(self.broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs])

        asyncio.run(send())

    def drain(self, timeout: float) -> bool:
        return asyncio.run(wait_all_drained(self.broker, self.app_id, self.topics, timeout))

    def divergences(self) -> list[Any]:
        assert self.stack.info is not None
        tickets = {t.ticket_id for t in self.history.truth.tickets.values()}
        (rows, status_log, comments), docs = asyncio.run(
            read_run(self.store_url, self.stack.info.es_url, set(self.tenants), tickets)
        )
        assert len(docs) > 50, len(docs)
        return divergences(self.history, rows, status_log, comments, docs)

    def parked(self) -> list[ParkedRecord]:
        return [e.record for e in DeadLetterStore(self.work / "w" / "dlq").ordered()]

    def log_tail(self, chars: int = 3000) -> str:
        path = self.work / "w" / "worker.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"


def index_back(
    stack: LocalStack, drain: Callable[[float], bool], commits: CommitWatch, since: float, what: str
) -> tuple[bool, dict[str, float | None]]:
    """Start the stack's index again (down since ``since``, monotonic), wait until the run drains
    (``drain(timeout)``), then for every behind partition's next commit: ``(drained, recovery)``."""
    start_service(stack, "elasticsearch")
    back = time.monotonic()
    drained = drain(180)
    took = time.monotonic() - back
    print(f"index back {back - since:.1f} s after {what}; drained={drained} {took:.1f} s later")
    return drained, commits.wait_recovered(back)


def assert_recovered(recovery: dict[str, float | None], log: str) -> None:
    """Every partition of the change topic that was behind committed within ``RECOVERY_BOUND``."""
    assert recovery, "no partition of the change topic was behind when the index came back"
    slow = {part: took for part, took in recovery.items() if took is None or took > RECOVERY_BOUND}
    assert not slow, f"partitions not committing within {RECOVERY_BOUND} s: {recovery}\n{log}"
