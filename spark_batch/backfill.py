"""Backfill: archived events through the same agent ``handle()`` functions as the stream.

Each executor task parses its share of the archive, routes every event to the
agent of its topic, maps it with the agent's pure ``handle`` and applies the
mutations with their versions through the store adapter (batches, bounded
concurrency, transient errors retried). Because every write is versioned, a
backfill converges to the same state in any split and order, while the stream
is live, and a re-run changes nothing; a Spark task retry (or a recomputed
partition of the cached task output) therefore only repeats writes.

Writes go through ``io.apply_batched`` with one event's mutations as a unit:
a batch that fails permanently is applied again event by event, so one bad
event is rejected alone. Events that do not parse, route, map or write are
counted per agent and error class, with samples, and returned to the driver,
which parks them in the dead-letter WAL when given ``dlq_root``. With ``es_url`` the hub rows
the backfill touched are then projected into the index (``reproject``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from framework.core.events import Event, EventError, parse_event
from framework.core.sync import run_sync
from framework.runtime.agent import KeyedAgent
from spark_batch.archive import ArchiveFormat, read_archive
from spark_batch.io import Unit, WriteOptions, apply_batched, open_index
from spark_batch.progress import JobProgress
from spark_batch.projection import hub_of
from spark_batch.reproject import reproject
from stores.open import open_wide_store

__all__ = ["BackfillReport", "backfill", "backfill_task", "load_object"]

DEFAULT_AGENTS = "agents:reference_agents"
DEFAULT_ROUTER = "agents.event_types:topic_of"
_MAX_SAMPLES = 20


@dataclass
class BackfillReport:
    """Counts of a backfill: events, mutations per agent and kind, rejects, projections."""

    events: int = 0
    applied: int = 0
    mutations: dict[str, dict[str, int]] = field(default_factory=dict)
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    parked: int = 0
    projected: dict[str, int] | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "applied": self.applied,
            "mutations": self.mutations,
            "rejected": self.rejected,
            "parked": self.parked,
            "samples": self.samples,
            "projected": self.projected,
            "seconds": round(self.seconds, 3),
        }


def load_object(spec: str) -> Any:
    """The object named ``module:attribute``."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"expected MODULE:ATTR, got {spec!r}")
    return getattr(importlib.import_module(module), attr)


class _Mapper:
    """Parses, routes and maps raw events of one partition, counting as it goes."""

    def __init__(self, agents_spec: str, router_spec: str) -> None:
        self.agents: dict[str, KeyedAgent] = {a.topic: a for a in load_object(agents_spec)()}
        self.router: Callable[[str], str] = load_object(router_spec)
        self.stats: Counter[tuple[str, ...]] = Counter()
        self.samples: list[str] = []
        self.rejected: list[tuple[str, ...]] = []
        self._sources: dict[int, tuple[Any, Event]] = {}

    def reject(
        self, agent: str, exc: BaseException, raw: Any, event: Event | None, stage: str
    ) -> None:
        event_id = event.event_id if event is not None else None
        self.stats[("rejected", agent, type(exc).__name__)] += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(f"{agent} {event_id or '?'}: {type(exc).__name__}: {exc}"[:300])
        text = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True, default=str)
        self.rejected.append((
            "parked", agent, stage, type(exc).__name__, str(exc)[:4000], text,
            event.type if event is not None else "unknown",
            event.ordering_key if event is not None else "",
        ))  # fmt: skip

    def rejected_write(self, unit: Unit, exc: BaseException) -> None:
        raw, event = self._sources.pop(id(unit[1]), (None, None))
        self.reject(unit[0], exc, raw, event, "sink")

    def written(self, unit: Unit) -> None:
        self._sources.pop(id(unit[1]), None)

    def map(self, raw: Any) -> Unit | None:
        try:
            event: Event = parse_event(raw)
        except EventError as exc:
            self.reject("-", exc, raw, None, "parse")
            return None
        try:
            agent = self.agents[self.router(event.type)]
        except (EventError, KeyError) as exc:
            self.reject("-", exc, raw, event, "route")
            return None
        try:
            mutations = list(agent.handle(event))
        except ValueError as exc:
            self.reject(agent.name, exc, raw, event, "map")
            return None
        self._sources[id(mutations)] = (raw, event)
        return agent.name, mutations

    def mapped(self, part: Iterable[Any]) -> Iterator[Unit]:
        for raw in part:
            self.stats[("events",)] += 1
            if (m := self.map(raw)) is not None:
                yield m


def backfill_task(
    store_url: str, agents_spec: str, router_spec: str, opts: WriteOptions, part: Iterable[Any]
) -> Iterator[tuple[Any, ...]]:
    """Executor: map and apply one partition; yields ``("stat", key, n)``, ``("sample", text)``,
    ``("parked", ...)`` (a rejected event with its error) and ``("hub", hub_id)`` records (the
    hub rows whose documents may have changed)."""
    mapper = _Mapper(agents_spec, router_spec)
    hubs: set[str] = set()

    def done(unit: Unit, error: BaseException | None) -> None:
        agent, mutations = unit
        if error is not None:
            mapper.rejected_write(unit, error)
            return
        mapper.written(unit)
        mapper.stats[("applied",)] += 1
        for m in mutations:
            mapper.stats[("mutation", agent, type(m).__name__)] += 1
            if (hub := hub_of(m)) is not None:
                hubs.add(hub)

    async def run() -> None:
        store = await open_wide_store(store_url)
        try:
            await apply_batched(store, mapper.mapped(part), opts, done)
        finally:
            await store.close()

    asyncio.run(run())
    yield from (("stat", key, n) for key, n in mapper.stats.items())
    yield from (("sample", s) for s in mapper.samples)
    yield from mapper.rejected
    yield from (("hub", h) for h in hubs)


def _report(stats: Iterable[tuple[Any, ...]]) -> BackfillReport:
    report = BackfillReport()
    for record in stats:
        if record[0] == "parked":
            continue
        if record[0] == "sample":
            if len(report.samples) < _MAX_SAMPLES:
                report.samples.append(record[1])
            continue
        key, n = record[1], record[2]
        if key[0] == "events":
            report.events += n
        elif key[0] == "applied":
            report.applied += n
        else:
            table = report.mutations if key[0] == "mutation" else report.rejected
            by_agent = table.setdefault(key[1], {})
            by_agent[key[2]] = by_agent.get(key[2], 0) + n
    return report


def backfill(
    spark: SparkSession,
    paths: Sequence[str],
    store_url: str,
    *,
    fmt: ArchiveFormat = "auto",
    partitions: int | None = None,
    agents: str = DEFAULT_AGENTS,
    router: str = DEFAULT_ROUTER,
    es_url: str | None = None,
    alias: str | None = None,
    tombstones: str = "native",
    opts: WriteOptions | None = None,
    progress: JobProgress | None = None,
    dlq_root: str | os.PathLike[str] | None = None,
) -> BackfillReport:
    """Backfill the events in ``paths`` into the store (and project the touched rows when ``es_url``).

    Rejected events are parked in the dead-letter WAL at ``dlq_root`` (pipeline
    ``backfill:<agent>``) when it is given; they are always counted and sampled.
    """
    started = time.monotonic()
    opts = opts or WriteOptions()
    run_sync(_ensure_tables(store_url, agents))
    if progress is not None:
        progress.phase("applying archived events")
    raw = read_archive(spark, paths, fmt, partitions)
    task = functools.partial(backfill_task, store_url, agents, router, opts)
    out = raw.mapPartitions(task).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        records = out.filter(lambda r: r[0] != "hub").collect()
        report = _report(records)
        if dlq_root is not None:
            report.parked = _park(dlq_root, [r for r in records if r[0] == "parked"])
        if es_url is not None:
            if progress is not None:
                progress.phase("projecting touched rows")
            from agents.projection import INDEX_ALIAS, INDEX_MAPPINGS

            run_sync(_ensure_index(es_url, tombstones, alias or INDEX_ALIAS, INDEX_MAPPINGS))
            hubs = out.filter(lambda r: r[0] == "hub").map(lambda r: (r[1], 0)).distinct()
            n = max(1, partitions or spark.sparkContext.defaultParallelism)
            target = alias or INDEX_ALIAS
            actions = reproject(
                hubs,
                store_url=store_url,
                es_url=es_url,
                tombstones=tombstones,
                target=target,
                partitions=n,
                opts=opts,
            )
            report.projected = dict(actions)
    finally:
        out.unpersist()
    report.seconds = time.monotonic() - started
    return report


def _park(dlq_root: str | os.PathLike[str], rejected: Sequence[tuple[str, ...]]) -> int:
    """Park the rejected events (driver side: one WAL writer)."""
    if not rejected:
        return 0
    from framework.parking import DeadLetterWAL, ParkedRecord

    wal = DeadLetterWAL(Path(dlq_root))
    try:
        for _, agent, stage, error_class, error, text, event_type, key in rejected:
            wal.park_sync(ParkedRecord(
                pipeline=f"backfill:{agent}", topic="archive", partition=-1, offset=-1,
                key=key.encode() if key else None, value=text.encode(), stage=stage,
                error_class=error_class, error=error, parked_at=time.time(), event_type=event_type,
            ))  # fmt: skip
    finally:
        wal.close()
    return len(rejected)


async def _ensure_index(es_url: str, tombstones: str, alias: str, mappings: dict[str, Any]) -> None:
    index = open_index(es_url, tombstones)
    try:
        await index.ensure_index(alias, mappings)
    finally:
        await index.close()


async def _ensure_tables(store_url: str, agents_spec: str) -> None:
    """Declare every table the agents write (once, on the driver)."""
    store = await open_wide_store(store_url)
    try:
        for agent in load_object(agents_spec)():
            for schema in agent.tables:
                await store.ensure_table(schema)
    finally:
        await store.close()
