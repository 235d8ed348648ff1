"""Backfill: archived events through an app's agents, exactly as the stream maps them.

Each executor task loads the app from its ``MODULE:ATTR`` spec, parses its
share of the archive (an archive of raw records, ``archive.py``'s format ``records``, decoded by
the decoder of the agent consuming each record's topic, ``KeyedAgent.decoder``), routes every
event with ``App.route`` (an event of a topic only lookups read, ``App.topic_of``, only feeds
the lookups: counted, not mapped) and maps it
with ``framework.runtime.mapping.map_event`` (the agent's mutations plus the
version marks of the projections it feeds), then applies the mutations with
their versions through the store adapter (batches, bounded concurrency,
transient errors retried). Because every write is versioned, a backfill
converges to the same state in any split and order, while the stream is
live, and a re-run changes nothing; a Spark task retry (or a recomputed
partition of the cached task output) therefore only repeats writes.

Writes go through ``io.apply_batched`` with one event's mutations as a unit:
a batch that fails permanently is applied again event by event, so one bad
event is rejected alone. Events that do not parse or route, whose ``handle``
raises (anything: the stream's rule), or whose writes are rejected are
counted per agent and error class, with samples, and returned to the
driver, which parks them in the dead-letter WAL (stage ``parse``,
``route``, ``map`` or ``sink``). An app that declares ``id_mutation`` has
its owner ids resolved through the ID map as the stream does
(``spark_batch.id_resolution``: the map read from the store, broadcast). An app with notifications on gets one
notification entry per (tenant, bucket, table) of the applied writes of each run of
``NOTIFY_EVERY`` events of a Spark partition, after them. With ``es_url`` every partition the
backfill touched is then projected into the index, per projection
(``reproject``), and, given the ``broker`` (the group topics' ends version the
totals), every aggregate of the app into its tables
(``spark_batch.backfill_aggregates``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel, TaskContext
from pyspark.sql import SparkSession

from framework.core.events import Event, EventError, parse_event
from framework.core.projection import Projection, mark_writers
from framework.core.schema import SchemaError
from framework.core.sync import run_sync
from framework.decoders.base import Record, record_from_json
from framework.erasure.keyed import erasure_key
from framework.erasure.record import DenylistMissing, adopt_denylist, screen_of
from framework.erasure.screen import load_screen
from framework.idmutation.resolution import resolutions_for
from framework.notifications.schema import NOTIFICATION_TABLES
from framework.notifications.sink import write_notifications
from framework.runtime.errors import MessageError
from framework.runtime.mapping import map_event
from framework.runtime.processor import parse_work
from framework.runtime.work import Work
from spark_batch.apps import JobError, app_of, load_app, select
from spark_batch.archive import ArchiveFormat, read_archive
from spark_batch.backfill_aggregates import project_aggregates, require_ends
from spark_batch.id_resolution import BatchIdMap, id_map_broadcast
from spark_batch.io import Unit, WriteOptions, apply_batched, open_index
from spark_batch.lookups import BatchEntries, lookup_entries, map_joined
from spark_batch.progress import JobProgress
from spark_batch.projection import key_json
from spark_batch.reproject import reproject
from stores.open import open_wide_store

__all__ = ["BackfillReport", "backfill", "backfill_task", "prepare"]

_MAX_SAMPLES = 20
#: Events of a partition whose writes' notification entries are written together (a task holds
#: their mutations until then, so this bounds its memory and the garbage collector's work).
NOTIFY_EVERY = 20_000


@dataclass
class BackfillReport:
    """Counts of a backfill: events, mutations per agent and kind, rejects, projections."""

    events: int = 0
    applied: int = 0
    #: events of topics only lookups read (``App.lookup_topics``): entries, not mapped
    entries: int = 0
    mutations: dict[str, dict[str, int]] = field(default_factory=dict)
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    parked: int = 0
    #: actions per projection name, when the touched partitions were projected
    projected: dict[str, dict[str, int]] | None = None
    #: writes per aggregate name (contributions, totals, totals_deleted), when they were projected
    aggregated: dict[str, dict[str, int]] | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "applied": self.applied,
            "entries": self.entries,
            "mutations": self.mutations,
            "rejected": self.rejected,
            "parked": self.parked,
            "samples": self.samples,
            "projected": self.projected,
            "aggregated": self.aggregated,
            "seconds": round(self.seconds, 3),
        }


class _Mapper:
    """Parses, routes and maps raw events of one partition, counting as it goes."""

    def __init__(self, app_spec: str, screen_store: str | None = None) -> None:
        self.app = app_of(app_spec)
        self.stats: Counter[tuple[str, ...]] = Counter()
        self.samples: list[str] = []
        self.rejected: list[tuple[str | bytes, ...]] = []
        self._sources: dict[int, tuple[Any, Event]] = {}
        #: the app's erasure screen (the deny-list of ``screen_store`` when the task started), or None
        self.screen: Any = screen_of(self.app, screen_store) if screen_store is not None else None
        #: the final lookup entries (``spark_batch.lookups``), for agents that declare lookups
        self.entries: Any = None
        #: the ID resolution of each agent writing an owner table (``spark_batch.id_resolution``)
        self.resolutions: Mapping[str, Any] = {}

    def reject(self, agent: str, exc: BaseException, raw: Any, event: Event | None, stage: str) -> None:
        event_id = event.event_id if event is not None else None
        self.stats[("rejected", agent, type(exc).__name__)] += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(f"{agent} {event_id or '?'}: {stage}: {type(exc).__name__}: {exc}"[:300])
        text = raw if isinstance(raw, str | bytes) else json.dumps(raw, sort_keys=True, default=str)
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
        if isinstance(raw, Record) or (isinstance(raw, tuple) and raw[:1] == ("record",)):
            return self.map_record(raw if isinstance(raw, Record) else raw[1])
        try:
            event: Event = parse_event(raw)
        except Exception as exc:  # noqa: BLE001 - anything unparseable is the message's
            self.reject("-", exc, raw, None, "parse")
            return None
        try:
            if not self.app.consumed_by_agent(topic := self.app.topic_of(event)):
                self.stats[("entries", topic)] += 1  # an entry of a topic only lookups read
                return None
            agent = self.app.route(event)
        except Exception as exc:  # noqa: BLE001 - an event no agent takes is the message's
            self.reject("-", exc, raw, event, "route")
            return None
        return self.map_routed(agent, event, raw)

    def map_record(self, raw: Record | bytes) -> Unit | None:
        """A raw Kafka record (or its archived line, ``framework.decoders.record_to_json``): decoded
        by the decoder of the agent consuming its topic (``parse_work``'s rule), then mapped."""
        try:
            record = raw if isinstance(raw, Record) else record_from_json(raw)
        except Exception as exc:  # noqa: BLE001 - a line that is no record is the message's
            self.reject("-", exc, raw, None, "parse")
            return None
        text = raw if isinstance(raw, bytes) else record.value or b""
        agent = next((a for a in self.app.agents if a.topic == record.topic), None)
        if agent is None:
            self.reject("-", EventError("topic", f"no agent consumes {record.topic!r}"), text, None, "route")
            return None
        work = Work((record.topic, record.partition), record.offset, record.key, record.value)
        work.decoder, work.timestamp, work.headers = agent.decoder, record.timestamp, record.headers
        try:
            event = parse_work(work)
        except MessageError as exc:
            self.reject(agent.name, exc.cause, text, None, exc.stage)
            return None
        return self.map_routed(agent, event, text)

    def map_routed(self, agent: Any, event: Event, raw: Any) -> Unit | None:
        """The mutations of ``event`` by ``agent`` (rejected at stage ``map`` when it raises)."""
        try:
            resolve = self.resolutions.get(agent.name)
            if agent.lookups:  # joins: the final entries, the stream's version rule
                marked = () if resolve else self.app.views_of(agent)
                mutations = map_joined(agent, event, self.entries, marked)
                if resolve is not None:  # owner ids resolved at the write version, then the marks
                    mutations = resolve(event, mutations)
                    mutations += marks_of(self.app.views_of(agent), mutations)
                if self.screen is not None:  # erased subjects' writes out, as map_event does
                    mutations = self.screen(event, mutations)
            else:
                mutations = map_event(agent, event, self.app.views_of(agent), self.screen, resolve)
        except MessageError as exc:
            self.reject(agent.name, exc.cause, raw, event, exc.stage)
            return None
        self._sources[id(mutations)] = (raw, event)
        return agent.name, mutations

    def mapped(self, part: Iterable[Any]) -> Iterator[Unit]:
        for raw in part:
            self.stats[("events",)] += 1
            if (m := self.map(raw)) is not None:
                yield m


def marks_of(projections: Sequence[Projection], mutations: Sequence[Any]) -> list[Any]:
    """The version marks of ``projections`` for ``mutations`` (MessageError at stage ``map``)."""
    try:
        return [mark for p in mark_writers(projections) for mark in p.version_marks(mutations)]
    except Exception as exc:  # noqa: BLE001 - as map_event
        raise MessageError("map", exc) from exc


def backfill_task(
    store_url: str,
    app_spec: str,
    project: Sequence[str],
    opts: WriteOptions,
    part: Iterable[Any],
    *,
    run_id: str = "",
    erasure: bytes | None = None,
    entries: Any = None,
    id_map: Any = None,
    notify_every: int = NOTIFY_EVERY,
) -> Iterator[tuple[Any, ...]]:
    """Executor: map and apply one partition; with the app's notifications on, the notification
    entries of each run of ``notify_every`` events after its writes (batch
    ``backfill:<run_id>:<partition>``, then ``...:<partition>.<n>`` for the n-th run). Events go
    through the app's erasure screen (``erasure``: the key; else ``CONVERGE_ERASURE_KEY``).

    Yields ``("stat", key, n)``, ``("sample", text)``, ``("parked", ...)`` (a
    rejected event with its error) and, for the projections named in
    ``project``, ``("touched", projection, doc_id, key)`` records (the
    partitions whose documents may have changed).
    """
    mapper = _Mapper(app_spec)
    if entries is not None:  # the broadcast final lookup entries
        mapper.entries = BatchEntries(entries.value)
    if id_map is not None:  # the broadcast ID map
        table = BatchIdMap(id_map.value)
        mapper.resolutions = resolutions_for(mapper.app.id_mutation, mapper.app.agents, table)
    projections = [mapper.app.projection(name) for name in project]
    touched: set[tuple[str, str, str]] = set()
    notified: list[Any] | None = [] if mapper.app.notifications is not None else None

    def done(unit: Unit, error: BaseException | None) -> None:
        agent, mutations = unit
        if error is not None:
            mapper.rejected_write(unit, error)
            return
        mapper.written(unit)
        if notified is not None:
            notified.extend(mutations)
        mapper.stats[("applied",)] += 1
        for m in mutations:
            mapper.stats[("mutation", agent, type(m).__name__)] += 1
        for p in projections:
            for doc_id, (key, _) in p.touched(mutations).items():
                touched.add((p.name, doc_id, key_json(p, key)))

    async def run() -> None:
        store = await open_wide_store(store_url)
        try:
            key = erasure or erasure_key(required=False)
            mapper.screen = await load_screen(store, mapper.app, key)
            if notified is None:
                await apply_batched(store, mapper.mapped(part), opts, done)
                return
            batch = f"backfill:{run_id}:{TaskContext.get().partitionId()}"  # type: ignore[union-attr]
            for n, segment in enumerate(_segments(mapper.mapped(part), notify_every)):
                await apply_batched(store, segment, opts, done)
                if notified:
                    await write_notifications(
                        store, mapper.app, batch if n == 0 else f"{batch}.{n}", notified
                    )
                    notified.clear()
        finally:
            await store.close()

    asyncio.run(run())
    yield from (("stat", key, n) for key, n in mapper.stats.items())
    yield from (("sample", s) for s in mapper.samples)
    yield from mapper.rejected
    yield from (("touched", *t) for t in touched)


def _segments(units: Iterator[Unit], size: int) -> Iterator[Iterator[Unit]]:
    """``units`` in consecutive runs of up to ``size`` (each consumed before the next is asked for)."""
    while (first := next(units, None)) is not None:
        yield itertools.chain((first,), itertools.islice(units, size - 1))


def _touched(projection: str, record: tuple[Any, ...]) -> bool:
    return record[0] == "touched" and record[1] == projection


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
        elif key[0] == "entries":
            report.entries += n
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
    app: str,
    projection: str | None = None,
    es_url: str | None = None,
    alias: str | None = None,
    tombstones: str = "native",
    fmt: ArchiveFormat = "auto",
    partitions: int | None = None,
    opts: WriteOptions | None = None,
    progress: JobProgress | None = None,
    dlq_root: str | os.PathLike[str] | None = None,
    denylist_store: str | None = None,
    broker: str | None = None,
    notify_every: int = NOTIFY_EVERY,
) -> BackfillReport:
    """Backfill the events in ``paths`` into the store through the app ``app`` (``MODULE:ATTR``).

    Every table of the app is ensured first. With ``es_url`` the touched
    partitions of every projection (or of ``projection`` only) are then
    projected into their index, created with the projection's mappings when
    missing; ``alias`` replaces the projection's alias (one projection only).
    Rejected events are parked in the dead-letter WAL at ``dlq_root``
    (pipeline ``backfill:<agent>``) when it is given; they are always
    counted and sampled. ``JobError`` before any Spark job for an app or
    projection the backfill cannot use, or an app with personal data and no
    deny-list of record (``denylist_store``: the store that holds it).
    With ``es_url`` and ``broker`` (and no ``projection`` or ``alias`` chosen), the app's
    aggregates are then written too (``project_aggregates``); ``JobError`` before any write when
    the broker cannot be read. ``notify_every``: events of a partition whose notification entries
    are written together (an app with notifications on).
    """
    if notify_every < 1:
        raise ValueError(f"notify_every must be positive, got {notify_every}")
    started = time.monotonic()
    opts = opts or WriteOptions()
    chosen = prepare(app, store_url, projection=projection, es_url=es_url, alias=alias, tombstones=tombstones,
                     denylist_store=denylist_store)  # fmt: skip
    aggregated = es_url is not None and broker is not None and projection is None and alias is None
    if aggregated:
        require_ends(app, broker or "")
    if progress is not None:
        progress.phase("applying archived events")
    raw = read_archive(spark, paths, fmt, partitions)
    names = tuple(p.name for p in chosen)
    key = erasure_key(required=False)  # the driver's erasure key, shipped with the task (issue 15)
    run_id = uuid.uuid4().hex[:12]
    entries = lookup_entries(spark, raw, app)  # None unless the app declares lookups
    id_map = id_map_broadcast(spark, store_url, app)  # None unless the app declares id_mutation
    task = functools.partial(backfill_task, store_url, app, names, opts, run_id=run_id, erasure=key,
                             entries=entries, id_map=id_map, notify_every=notify_every)  # fmt: skip
    out = raw.mapPartitions(task).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        records = out.filter(lambda r: r[0] != "touched").collect()
        report = _report(records)
        if dlq_root is not None:
            report.parked = _park(dlq_root, [r for r in records if r[0] == "parked"])
        if es_url is not None:
            report.projected = {}
            n = max(1, partitions or spark.sparkContext.defaultParallelism)
            for p in chosen:
                if progress is not None:
                    progress.phase(f"projecting touched partitions ({p.name})")
                actions = reproject(
                    out.filter(functools.partial(_touched, p.name)).map(lambda r: (r[2], r[3], 0)),
                    app=app,
                    projection=p.name,
                    store_url=store_url,
                    es_url=es_url,
                    tombstones=tombstones,
                    target=alias or p.alias,
                    partitions=n,
                    opts=opts,
                )
                report.projected[p.name] = dict(actions)
            if aggregated:
                if progress is not None:
                    progress.phase("projecting aggregates")
                report.aggregated = project_aggregates(
                    spark, app=app, store_url=store_url, broker=broker or "", shards=n, opts=opts
                )
    finally:
        out.unpersist()
    report.seconds = time.monotonic() - started
    return report


def prepare(
    app: str,
    store_url: str,
    *,
    projection: str | None = None,
    es_url: str | None = None,
    alias: str | None = None,
    tombstones: str = "native",
    denylist_store: str | None = None,
) -> tuple[Projection, ...]:
    """Driver side, before any Spark job: load the app, settle its erasure deny-list of record
    (``framework.erasure.record``), ensure its tables and, with ``es_url``, the index of every
    projection to project (returned); ``JobError`` for what the backfill cannot use."""
    the_app = load_app(app)
    chosen = select(the_app, projection) if es_url is not None else ()
    if alias is not None and len(chosen) != 1:
        raise JobError("--alias names the index of one projection: choose it with --projection")
    try:
        adopt_denylist(the_app, store_url, denylist_store)
    except DenylistMissing as exc:
        raise JobError(str(exc)) from None
    notified = NOTIFICATION_TABLES if the_app.notifications is not None else ()
    run_sync(_ensure_tables(store_url, (*the_app.tables, *notified)))
    for p in chosen:
        run_sync(_ensure_index(es_url or "", tombstones, alias or p.alias, p.mappings))
    return chosen


def _park(dlq_root: str | os.PathLike[str], rejected: Sequence[tuple[str, ...]]) -> int:
    """Park the rejected events (driver side: one WAL writer)."""
    if not rejected:
        return 0
    from framework.dlq import DeadLetterWAL, ParkedRecord

    wal = DeadLetterWAL(Path(dlq_root))
    try:
        for _, agent, stage, error_class, error, text, event_type, key in rejected:
            wal.park_sync(ParkedRecord(
                pipeline=f"backfill:{agent}", topic="archive", partition=-1, offset=-1,
                key=key.encode() if key else None, stage=stage,
                value=text if isinstance(text, bytes) else text.encode(),
                error_class=error_class, error=error, parked_at=time.time(), event_type=event_type,
            ))  # fmt: skip
    finally:
        wal.close()
    return len(rejected)


async def _ensure_index(es_url: str, tombstones: str, alias: str, mappings: Any) -> None:
    index = open_index(es_url, tombstones)
    try:
        await index.ensure_index(alias, mappings)
    finally:
        await index.close()


async def _ensure_tables(store_url: str, tables: Iterable[Any]) -> None:
    """Declare every table the app writes or reads (once, on the driver)."""
    store = await open_wide_store(store_url)
    try:
        for schema in tables:
            try:
                await store.ensure_table(schema)
            except SchemaError as exc:
                raise JobError(f"store {store_url}: table {schema.name}: {exc}") from None
    finally:
        await store.close()
