"""Faust apps measured by ``agent_throughput.py``, chosen by env BENCH_VARIANT.

- ``plain``: ``async for value in stream`` with JSON decoding, no writes (b1);
- ``naive``: the same, awaiting each event's store write in turn (b2); both on Faust's own
  transport (not the worker's ``HandoverTransport``), as a plain Faust app runs;
- ``keyed``: the KeyedAgent runtime with the same mapping and store (c);
- ``app`` and ``app-agg``: the worker ``build_worker`` wires for an ``App`` whose agent
  also writes the event's time (``DatedBenchAgent``), without an aggregate and with one
  (``OrgDaily``: entities and the sum of their ``n`` per organisation and UTC day), so that
  ``app-agg`` runs the change feed, the projector's contribution writes and the totals
  processor on the group topic too.

Each writes ``bench-result.json`` to its data dir: the events timed, the seconds and the
worker's CPU seconds (user + system of this process, from ``/proc/self/stat``) between two
samples. ``plain``, ``naive`` and ``keyed`` sample at the first finished event (batch) and at
the BENCH_EVENTS-th; ``app`` and ``app-agg`` poll their runtimes' acknowledgement counters
every 10 ms (``DrainMeter``) and sample at the first poll that saw an acknowledged event and
once the agent acknowledged all BENCH_EVENTS and, for ``app-agg``, the projector then the totals
processor acknowledged every record of their topics (the change topic's and the group topic's
end offsets, read once the stage before has finished). For diagnosis, BENCH_NOOP_SINK=1 skips the
store write, BENCH_DEDUPE=1 skips exact duplicates, BENCH_NOTIFY=1 (or ``inserts``)
writes notification entries with each batch, BENCH_CONCURRENCY, BENCH_MAX_BATCH and
BENCH_MAX_PENDING set the runtime's bounds (unset: the runtime's defaults, ``RuntimeConfig`` and
``SchedulerConfig``: micro-batches of 4,000; 2,000 before, and 500 here until issue 44),
BENCH_STORE_WRITER=process writes the store from a child process (``SqliteStore(writer=
"process")``) and BENCH_MAP_AHEAD=1 maps a batch while the previous one is written
(``AgentProcessor(map_ahead=True)``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import faust
from faust.transport import by_url

from benchmarks.proc_cpu import cpu_seconds, tree_cpu_seconds
from framework.app import App
from framework.core.aggregate import Aggregate, Contribution, MeasureKind, Window
from framework.core.events import Event, parse_event
from framework.core.mutations import Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from framework.dlq import DeadLetterWAL
from framework.kafka_admin import end_offsets
from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
from framework.notifications.sink import NotificationSink
from framework.runtime.agent import KeyedAgent
from framework.runtime.binding import AgentRuntime, RuntimeConfig
from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.processor import AgentProcessor
from framework.runtime.scheduler import SchedulerConfig
from framework.runtime.sinks import WideColumnSink, Written
from framework.settings import Settings
from framework.worker.faust_app import ConvergeFaustApp, create_faust_app
from framework.worker.wiring import build_worker
from stores.sqlite.store import SqliteStore

log = logging.getLogger(__name__)

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


BENCH_DATED = TableSchema(
    "bench_dated",
    partition_key=(Column("k", "text"),),
    columns=(Column("n", "bigint"), Column("body", "text"), Column("at", "bigint")),
)
#: Seconds in a day: ``OrgDaily``'s window.
DAY_S = 86_400


class DatedBenchAgent(BenchAgent):
    """``BenchAgent``'s row with the event's time (``at``, epoch microseconds): the App variants' agent."""

    tables = (BENCH_DATED,)

    def handle(self, event: Event) -> Iterable[Mutation]:
        cells = {"n": event.payload["n"], "body": event.payload["body"], "at": event.occurred_at}
        return [Upsert(BENCH_DATED.name, {"k": event.ordering_key}, cells, event.version)]


class OrgDaily(Aggregate):
    """Entities and the sum of their ``n`` per organisation (the key's ``orgN``) and UTC day of ``at``."""

    name = "org_daily"
    tables = (BENCH_DATED,)
    group_by = ("org",)
    measures: ClassVar[Mapping[str, MeasureKind]] = {"entities": "count", "n": "sum"}
    window = Window(DAY_S)

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        live = [r.values() for r in rows[BENCH_DATED.name] if r.cells]
        if not live:
            return []
        row = live[0]
        org = str(key["k"]).split(":", 1)[0]
        return [Contribution({"org": org}, {"n": int(str(row["n"]))}, at=int(str(row["at"])) // 1_000_000)]


class Meter:
    """Records the time and the CPU seconds of this process and its children (a store's writer
    process) at the first and at the N-th finished event; ``own_cpu_s``: this process alone."""

    def __init__(self, out: Path, target: int, progress: Path | None = None) -> None:
        self.out, self.target, self.n, self.first, self.cpu, self.own = out, target, 0, 0.0, 0.0, 0.0
        self.batches = 0  # written batches (``MeteredProcessor``): the mean micro-batch is n / batches
        self.progress, self._shown = progress, 0.0

    def tick(self, k: int = 1) -> None:
        if self.n == 0:
            self.first, self.cpu = time.perf_counter(), tree_cpu_seconds()
            self.own = cpu_seconds(os.getpid())
        self.n += k
        if self.progress is not None and time.perf_counter() - self._shown > 1.0:
            self._shown = time.perf_counter()
            self.progress.write_text(str(self.n))  # BENCH_PROGRESS: events done so far (soak)
        if self.n >= self.target and not self.out.exists():
            last, cpu, own = time.perf_counter(), tree_cpu_seconds(), cpu_seconds(os.getpid())
            self.out.write_text(json.dumps({"events": self.n, "seconds": last - self.first,
                                            "cpu_s": cpu - self.cpu, "own_cpu_s": own - self.own,
                                            "batches": self.batches}))  # fmt: skip


class DrainMeter:
    """Times an App variant from its runtimes' acknowledgement counters, polled every ``poll`` s:
    from the first poll that saw the agent acknowledge an event until it acknowledged ``target``
    and each aggregate's projector, then its totals processor, acknowledged every record of its
    topic (end offsets read once the stage before finished, so they are final). Writes ``out``
    with the events acknowledged in that interval, its seconds and this process's CPU seconds."""

    def __init__(self, worker: ConvergeFaustApp, app: App, broker: str, out: Path, target: int,
                 poll: float = 0.01) -> None:  # fmt: skip
        self.worker, self.app, self.broker, self.out = worker, app, broker, out
        self.target, self.poll = target, poll
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start polling (a ``starting`` hook: after the wiring's, which opens the runtimes)."""
        self._task = asyncio.get_running_loop().create_task(self.run())  # referenced: never collected

    def _acked(self, runtime_name: str) -> int:
        return next(r for r in self.worker.converge.runtimes if r.name == runtime_name).counters.acked

    async def _until(self, runtime_name: str, acked: int) -> None:
        while self._acked(runtime_name) < acked:
            await asyncio.sleep(self.poll)

    async def run(self) -> None:
        """Poll, then write ``out`` (a failure is logged: the benchmark then times out with the log)."""
        try:
            agent = self.app.agents[0].name
            await self._until(agent, 1)
            first, cpu, done = time.perf_counter(), cpu_seconds(os.getpid()), self._acked(agent)
            await self._until(agent, self.target)
            for a in self.app.aggregates:
                for runtime, topic in ((f"project.{a.name}", self.app.change_topic(a)),
                                       (f"totals.{a.name}", self.app.group_topic(a))):  # fmt: skip
                    await self._until(runtime, sum((await end_offsets(self.broker, topic)).values()))
            last, cpu_end = time.perf_counter(), cpu_seconds(os.getpid())
            self.out.write_text(json.dumps({"events": self.target - done, "seconds": last - first,
                                            "cpu_s": cpu_end - cpu}))  # fmt: skip
        except Exception:
            log.exception("bench meter failed")
            raise


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
        self.meter.batches += 1
        skipped = sum(1 for _, written in items if written is None)
        if skipped:
            self.meter.tick(skipped)


def _runtime_config() -> RuntimeConfig:
    """The runtime's defaults (what an app gets), but for the bounds set by BENCH_* variables."""
    runtime, scheduler = RuntimeConfig(), SchedulerConfig()
    env = os.environ.get
    scheduler = SchedulerConfig(
        max_concurrency=int(env("BENCH_CONCURRENCY", scheduler.max_concurrency)),
        max_pending_per_partition=int(env("BENCH_MAX_PENDING", scheduler.max_pending_per_partition)),
    )
    return RuntimeConfig(max_batch=int(env("BENCH_MAX_BATCH", runtime.max_batch)), scheduler=scheduler)


def build_app(variant: str, settings: Settings) -> ConvergeFaustApp:
    """The ``app`` or ``app-agg`` variant: an ``App`` wired by ``build_worker``, timed by ``DrainMeter``."""
    aggregates = [OrgDaily()] if variant == "app-agg" else []
    app = App(settings.app_id, agents=[DatedBenchAgent()], aggregates=aggregates, runtime=_runtime_config())
    worker = build_worker(app, settings)
    out = settings.data_dir / "bench-result.json"
    meter = DrainMeter(worker, app, settings.broker, out, int(os.environ["BENCH_EVENTS"]))
    worker.starting.append(meter.start)
    return worker


def build() -> faust.App:
    variant = os.environ["BENCH_VARIANT"]
    settings = Settings.resolve(os.environ["BENCH_GROUP"])
    if variant in ("app", "app-agg"):
        return build_app(variant, settings)
    app = create_faust_app(settings)
    data = settings.data_dir
    progress = os.environ.get("BENCH_PROGRESS")
    meter = Meter(
        data / "bench-result.json", int(os.environ["BENCH_EVENTS"]), Path(progress) if progress else None
    )
    latency = float(os.environ.get("BENCH_LATENCY_MS", "0")) / 1000
    in_process = os.environ.get("BENCH_STORE_WRITER") == "process"
    store = SqliteStore(data / "wide.db", writer="process" if in_process else "thread")
    store.engine.ensure_table(BENCH_TABLE)  # a writer process reads the tables declared when it starts
    agent = BenchAgent()
    if variant == "keyed":
        sinks = [LatencyStoreSink(store, latency, meter)]
        config = _runtime_config()
        dedupe = None
        if os.environ.get("BENCH_DEDUPE") == "1":  # skip exact duplicates (framework.runtime.dedupe)
            dedupe = DuplicateFilter(data / "dedupe")
        ahead = os.environ.get("BENCH_MAP_AHEAD") == "1"
        processor = MeteredProcessor(
            agent, sinks, config.sink_timeout, dedupe=dedupe, meter=meter, map_ahead=ahead
        )
        AgentRuntime(app, agent.topic, processor, DeadLetterWAL(settings.dlq_root), config)
        return app
    app.transport = by_url(app.conf.broker_consumer[0])(app.conf.broker_consumer, app)  # Faust's own
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
