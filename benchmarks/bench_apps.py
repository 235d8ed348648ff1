"""Faust apps measured by ``agent_throughput.py``, chosen by env BENCH_VARIANT.

- ``plain``: ``async for value in stream`` with JSON decoding, no writes (b1);
- ``naive``: the same, awaiting each event's store write in turn (b2);
- ``keyed``: the KeyedAgent runtime with the same mapping and store (c).

Each writes ``bench-result.json`` (first and last event times) to its data dir
once BENCH_EVENTS events are done. For diagnosis, BENCH_NOOP_SINK=1 skips the
store write, BENCH_DEDUPE=1 skips exact duplicates, BENCH_NOTIFY=1 (or ``inserts``)
writes notification entries with each batch, and BENCH_CONCURRENCY,
BENCH_MAX_BATCH and BENCH_MAX_PENDING set the runtime's bounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import faust

from framework.core.events import Event, parse_event
from framework.core.mutations import Mutation, Upsert
from framework.core.schema import Column, TableSchema
from framework.dlq import DeadLetterWAL
from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
from framework.notifications.sink import NotificationSink
from framework.runtime.agent import KeyedAgent
from framework.runtime.binding import AgentRuntime, RuntimeConfig
from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.processor import AgentProcessor
from framework.runtime.scheduler import SchedulerConfig
from framework.runtime.sinks import WideColumnSink, Written
from framework.settings import Settings
from framework.worker.faust_app import create_faust_app
from stores.sqlite.store import SqliteStore

BENCH_TABLE = TableSchema(
    "bench", partition_key=(Column("k", "text"),), columns=(Column("n", "bigint"), Column("body", "text"))
)


class BenchAgent(KeyedAgent):
    name = "bench"
    topic = os.environ.get("BENCH_TOPIC", "bench-in")
    tables = (BENCH_TABLE,)

    def handle(self, event: Event) -> Iterable[Mutation]:
        return [Upsert("bench", {"k": event.ordering_key},
                       {"n": event.payload["n"], "body": event.payload["body"]}, event.version)]  # fmt: skip


class Meter:
    """Records the time of the first and of the N-th finished event."""

    def __init__(self, out: Path, target: int, progress: Path | None = None) -> None:
        self.out, self.target, self.n, self.first = out, target, 0, 0.0
        self.progress, self._shown = progress, 0.0

    def tick(self, k: int = 1) -> None:
        if self.n == 0:
            self.first = time.perf_counter()
        self.n += k
        if self.progress is not None and time.perf_counter() - self._shown > 1.0:
            self._shown = time.perf_counter()
            self.progress.write_text(str(self.n))  # BENCH_PROGRESS: events done so far (soak)
        if self.n >= self.target and not self.out.exists():
            last = time.perf_counter()
            self.out.write_text(json.dumps({"events": self.n, "seconds": last - self.first}))


class LatencyStoreSink(WideColumnSink):
    """The store write preceded by an injected destination latency."""

    def __init__(self, store: SqliteStore, latency_s: float, meter: Meter | None = None) -> None:
        super().__init__(store)
        self.latency_s, self.meter = latency_s, meter
        self.noop = os.environ.get("BENCH_NOOP_SINK") == "1"  # isolates the runtime from the store
        self.notify = _notification_sink(store)

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        await self.write_batch([(event, mutations)])

    async def write_batch(self, batch: Sequence[Written]) -> None:
        """One injected latency per call: a batch is one round trip."""
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.notify is not None:
            await self.notify.write_batch(batch)
        elif not self.noop:
            await super().write_batch(batch)
        if self.meter is not None:
            self.meter.tick(len(batch))


def _notification_sink(store: SqliteStore) -> NotificationSink | None:
    """BENCH_NOTIFY=1: the store write with notification entries (tenant: the key's ``orgN``);
    ``inserts``: the same with the read that tells inserted from updated (``count_inserts``)."""
    mode = os.environ.get("BENCH_NOTIFY", "0")
    if mode == "0":
        return None
    for schema in NOTIFICATION_TABLES:
        store.engine.ensure_table(schema)
    config = NotificationConfig(tenant_of=lambda table, key: str(key["k"]).split(":")[0],
                                count_inserts=mode == "inserts")  # fmt: skip
    return NotificationSink(store, "bench", config, prefix="bench")


class MeteredProcessor(AgentProcessor):
    """Counts the exact duplicates it skips as finished events too (the sink counts the rest)."""

    def __init__(self, *args: Any, meter: Meter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.meter = meter

    async def write_batch(self, items: Sequence[Any]) -> None:
        await super().write_batch(items)
        skipped = sum(1 for _, written in items if written is None)
        if skipped:
            self.meter.tick(skipped)


def build() -> faust.App:
    variant = os.environ["BENCH_VARIANT"]
    settings = Settings.resolve(os.environ["BENCH_GROUP"])
    app = create_faust_app(settings)
    data = settings.data_dir
    progress = os.environ.get("BENCH_PROGRESS")
    meter = Meter(
        data / "bench-result.json", int(os.environ["BENCH_EVENTS"]), Path(progress) if progress else None
    )
    latency = float(os.environ.get("BENCH_LATENCY_MS", "0")) / 1000
    store = SqliteStore(data / "wide.db")
    store.engine.ensure_table(BENCH_TABLE)
    agent = BenchAgent()
    if variant == "keyed":
        sinks = [LatencyStoreSink(store, latency, meter)]
        scheduler = SchedulerConfig(
            max_concurrency=int(os.environ.get("BENCH_CONCURRENCY", "64")),
            max_pending_per_partition=int(os.environ.get("BENCH_MAX_PENDING", "2000")),
        )
        config = RuntimeConfig(max_batch=int(os.environ.get("BENCH_MAX_BATCH", "500")), scheduler=scheduler)
        dedupe = None
        if os.environ.get("BENCH_DEDUPE") == "1":  # skip exact duplicates (framework.runtime.dedupe)
            dedupe = DuplicateFilter(data / "dedupe")
        processor = MeteredProcessor(agent, sinks, config.sink_timeout, dedupe=dedupe, meter=meter)
        AgentRuntime(app, agent.topic, processor, DeadLetterWAL(settings.dlq_root), config)
        return app
    topic = app.topic(agent.topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw")  # fmt: skip
    sink = LatencyStoreSink(store, latency)

    @app.agent(topic, name=f"bench.{variant}")
    async def consume(stream: faust.StreamT) -> None:
        async for value in stream:
            event = parse_event(value)
            if variant == "naive":
                await sink.write(event, list(agent.handle(event)))
            meter.tick()

    return app
