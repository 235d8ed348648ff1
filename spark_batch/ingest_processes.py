"""The processes of the micro-batch ingestion job, each a Spark job over one batch's offset ranges.

Every process reads the batch's ranges itself (executors, aiokafka) and maps
the events itself (parse, ``App.route`` by event type, ``map_event``: the
backfill's mapper), so any one of them can re-run a batch alone. A record
whose Kafka key is not its event's ordering key is parked at stage ``key``, and
a record without a value (null: a Kafka tombstone) at stage ``parse``
(``EventError`` "empty message"), by the store process, which counts them
among its events; the other processes skip them, as the stream does:

- ``store``: the agents' mutations and version marks into the wide-column
  store (``spark_batch.io.apply_batched``: batches, retries, a bad event
  rejected alone); rejected events are parked in the dead-letter WAL;
- ``notifications``: the notification rows of the batch's writes
  (``framework.notifications.notification_mutations`` on the driver, over the
  mutations the executors mapped), written to the store, stamped when written
  (a re-run writes them again, later);
- ``index``: every document the batch touched, per projection, read from
  the store (``framework.runtime.projector.read_documents``) and bulk-written
  at its version.

Each returns a small report; an error stops it before its checkpoint, so the
next run repeats it. All writes are versioned, so a repeat changes nothing, but
for notification entries: a repeat adds entries at a later time (consumers may
see a batch's keys twice, never miss them).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import RDD
from pyspark.sql import SparkSession

from framework.core.events import Event, EventError, parse_event
from framework.core.mutations import Mutation
from framework.core.projection import Projection
from framework.decoders.base import Record
from framework.jobs.batches import Batch, OffsetRange
from framework.runtime.processor import key_mismatch
from framework.runtime.projector import read_documents
from spark_batch.apps import JobError, app_of
from spark_batch.backfill import _Mapper
from spark_batch.codec import key_from_json
from spark_batch.io import Unit, WriteOptions, apply_batched, bulk_batched, open_index
from spark_batch.kafka_ranges import ranges_of, read_range_sync, read_records_sync
from spark_batch.projection import key_json
from stores.base import IndexOp
from stores.open import open_wide_store

__all__ = ["IngestConfig", "ranges_rdd", "store_process", "notification_process", "index_process"]


@dataclass(frozen=True)
class IngestConfig:
    """What the processes of one ingestion job need (plain values: they travel to executors)."""

    app: str
    broker: str
    store_url: str
    job: str
    es_url: str | None = None
    tombstones: str = "native"
    #: projection name -> index alias written (every projection of the app by default)
    aliases: dict[str, str] = field(default_factory=dict)
    opts: WriteOptions = field(default_factory=WriteOptions)
    #: offsets per Spark task
    split: int = 5000
    dlq_root: str | None = None


#: ``stray(kafka_key, raw, event, error)``: a record whose Kafka key is not its event's ordering key.
Stray = Callable[[bytes | None, bytes | str, Event, EventError], None]
#: ``empty(kafka_key)``: a record whose value is null.
Empty = Callable[[bytes | None], None]


def _values(
    broker: str,
    part: Iterable[Any],
    stray: Stray | None = None,
    empty: Empty | None = None,
    decoded: frozenset[str] = frozenset(),
) -> Iterator[bytes | str | Record]:
    """The values of the ranges' records (text when UTF-8), without those whose Kafka key is not
    the ordering key of the event they hold (``key_mismatch``, the stream's rule) nor those whose
    value is null: ``stray`` and ``empty`` get them (the store process parks them at stage ``key``
    and ``parse``, as the stream's ``parse_work``), the other processes skip them. A record of a
    topic in ``decoded`` (its agent has a decoder) is yielded whole (headers and timestamp too,
    ``read_records_sync``), tombstones too, for the mapper to decode (``_Mapper.map_record``)."""
    for r in part:
        if r.topic in decoded:
            yield from read_records_sync(broker, r)
            continue
        for _, _, _, key, value in read_range_sync(broker, r):
            if value is None:
                if empty is not None:
                    empty(key)
                continue
            try:
                raw: bytes | str = value.decode("utf-8")
            except UnicodeDecodeError:
                yield value  # parse_event rejects it, the store process parks it
                continue
            try:
                event = parse_event(raw)
            except Exception:  # noqa: BLE001 - the mapper parses it again and rejects it at parse
                yield raw
                continue
            mismatch = key_mismatch(key, event)
            if mismatch is None:
                yield raw
            elif stray is not None:
                stray(key, raw, event, mismatch)


def _decoded(app: Any) -> frozenset[str]:
    """The topics whose agent has a decoder (``KeyedAgent.decoder``)."""
    return frozenset(a.topic for a in app.agents if a.decoder is not None)


def ranges_rdd(spark: SparkSession, cfg: IngestConfig, batch: Batch) -> RDD | None:
    """The batch's ranges in Spark partitions of at most ``cfg.split`` offsets (a long range cut,
    short ones packed together); None for an empty batch."""
    groups: list[list[OffsetRange]] = []
    size = 0
    for piece in ranges_of(batch.input, cfg.split):
        if groups and size + piece.size <= cfg.split:
            groups[-1].append(piece)
            size += piece.size
        else:
            groups.append([piece])
            size = piece.size
    if not groups:
        return None
    return spark.sparkContext.parallelize(groups, len(groups)).flatMap(lambda group: group)


def _mapped(cfg: IngestConfig, part: Iterable[Any]) -> Iterator[tuple[str, list[Mutation]]]:
    """The (agent, mutations) of every event of the ranges that maps (the others are the store
    process's to park)."""
    mapper = _Mapper(cfg.app, cfg.store_url)
    yield from mapper.mapped(_values(cfg.broker, part, decoded=_decoded(mapper.app)))


# -- store ------------------------------------------------------------------------------------
def _store_task(cfg: IngestConfig, part: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """Executor: map and apply the ranges' events (one event's mutations succeed or fail together);
    yields ``("stat", key, n)`` and ``("parked", ...)`` records, as a backfill task does."""
    mapper = _Mapper(cfg.app, cfg.store_url)

    def stray(key: bytes | None, raw: bytes | str, event: Event, error: EventError) -> None:
        mapper.stats[("events",)] += 1
        mapper.reject("-", error, raw, event, "key")

    empties: list[tuple[Any, ...]] = []

    def empty(key: bytes | None) -> None:
        mapper.stats[("events",)] += 1
        mapper.reject("-", EventError("event", "empty message"), b"", None, "parse")
        parked = mapper.rejected.pop()  # parked as the stream parks it: no value, the Kafka key
        empties.append((*parked[:5], None, parked[6], key))

    # read first: the apply runs its own event loop
    values = list(_values(cfg.broker, part, stray, empty, _decoded(mapper.app)))

    def done(unit: Unit, error: BaseException | None) -> None:
        if error is not None:
            mapper.rejected_write(unit, error)
            return
        mapper.written(unit)
        mapper.stats[("applied",)] += 1
        mapper.stats[("mutation", unit[0], "all")] += len(unit[1])

    async def run() -> None:
        store = await open_wide_store(cfg.store_url)
        try:
            await apply_batched(store, mapper.mapped(values), cfg.opts, done)
        finally:
            await store.close()

    asyncio.run(run())
    yield from (("stat", key, n) for key, n in mapper.stats.items())
    yield from mapper.rejected
    yield from empties


def store_process(spark: SparkSession, cfg: IngestConfig, batch: Batch) -> dict[str, Any]:
    """Apply the batch's events through the app's agents; park the rejected ones."""
    rdd = ranges_rdd(spark, cfg, batch)
    records = [] if rdd is None else rdd.mapPartitions(functools.partial(_store_task, cfg)).collect()
    counts: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    parked = [r for r in records if r[0] == "parked"]
    for r in records:
        if r[0] == "stat":
            key, n = r[1], r[2]
            if key[0] in ("events", "applied"):
                counts[key[0]] += n
            elif key[0] == "mutation":
                counts["mutations"] += n
            elif key[0] == "rejected":
                rejected[f"{key[1]}:{key[2]}"] += n
    if parked and cfg.dlq_root is not None:
        _park(cfg.dlq_root, cfg.job, batch.batch_id, parked)
    return {**counts, "rejected": dict(rejected), "parked": len(parked) if cfg.dlq_root else 0}


def _park(dlq_root: str, job: str, batch_id: int, rejected: Sequence[tuple[Any, ...]]) -> None:
    """Park the rejected records (driver side: one WAL writer); a record's text and key may be
    bytes (not UTF-8) or None (a null value, a record without a key)."""
    from framework.dlq import DeadLetterWAL, ParkedRecord

    wal = DeadLetterWAL(Path(dlq_root))
    try:
        for _, agent, stage, error_class, error, text, event_type, key in rejected:
            wal.park_sync(ParkedRecord(
                pipeline=f"ingest:{agent}", topic=f"{job}/batch-{batch_id}", partition=-1, offset=-1,
                key=key if isinstance(key, bytes) or key is None else key.encode() or None,
                value=text if isinstance(text, bytes) or text is None else text.encode(), stage=stage,
                error_class=error_class, error=error, parked_at=time.time(), event_type=event_type,
            ))  # fmt: skip
    finally:
        wal.close()


# -- notifications ----------------------------------------------------------------------------
def _written_task(cfg: IngestConfig, part: Iterable[Any]) -> Iterator[Mutation]:
    for _, mutations in _mapped(cfg, part):
        yield from mutations


def notification_process(
    spark: SparkSession, cfg: IngestConfig, batch: Batch, clock: Callable[[], float] = time.time
) -> dict[str, Any]:
    """Write the notification rows of the batch's writes, stamped when they are written (never
    with the batch's recorded start: a re-run, or a store process slower than the readers'
    ``settle``, would put them behind consumers' checkpoints) and written again at a fresh
    stamp after a write slower than ``late_after`` (``framework.notifications.stamping``).
    Counted as a blind writer: an upsert counts as updated, a log row as inserted, since the
    rows' state before the batch is gone once the store process ran."""
    from framework.notifications import NotificationConfig, notification_mutations
    from framework.notifications.stamping import write_stamped

    app = app_of(cfg.app)
    conf = getattr(app, "notifications", None) or NotificationConfig()
    rdd = ranges_rdd(spark, cfg, batch)
    written = [] if rdd is None else rdd.mapPartitions(functools.partial(_written_task, cfg)).collect()

    batch_id = f"{cfg.job}/{batch.batch_id}"

    def rows(at: int) -> list[Mutation]:
        return notification_mutations(app.name, batch_id, written, conf.tenant_of, at, conf.max_keys,
                                      bucket_width=conf.bucket_width, ttl=conf.ttl)  # fmt: skip

    async def write() -> int:
        store = await open_wide_store(cfg.store_url)

        async def apply(mutations: Sequence[Mutation]) -> None:
            for i in range(0, len(mutations), cfg.opts.batch_size):
                await store.apply(mutations[i : i + cfg.opts.batch_size])

        try:
            return await write_stamped(apply, rows, clock, conf.late_after)
        finally:
            await store.close()

    at = asyncio.run(write())
    return {"written": len(written), "rows": len(rows(at)), "ingested_at": at}


# -- index ------------------------------------------------------------------------------------
def _touched_task(
    cfg: IngestConfig, names: Sequence[str], part: Iterable[Any]
) -> Iterator[tuple[str, str, str]]:
    app = app_of(cfg.app)
    projections = [app.projection(n) for n in names]
    seen: set[tuple[str, str, str]] = set()
    for _, mutations in _mapped(cfg, part):
        for p in projections:
            for doc_id, (key, _) in p.touched(mutations).items():
                seen.add((p.name, doc_id, key_json(p, key)))
    yield from seen


def _of_projection(name: str, touched: tuple[str, str, str]) -> bool:
    """True for a touched document of projection ``name``."""
    return touched[0] == name


def _project_task(
    cfg: IngestConfig, name: str, alias: str, part: Iterable[tuple[str, str]]
) -> Iterator[tuple[str, int]]:
    p = app_of(cfg.app).projection(name)
    keys = [key_from_json(k) for _, k in part]
    if keys:
        yield from asyncio.run(_project(cfg, p, alias, keys)).items()


async def _project(cfg: IngestConfig, p: Projection, alias: str, keys: list[Any]) -> Counter[str]:
    store = await open_wide_store(cfg.store_url)
    index = open_index(cfg.es_url or "", cfg.tombstones)
    counts: Counter[str] = Counter()
    try:
        size = cfg.opts.batch_size
        for i in range(0, len(keys), size):
            documents = await read_documents(store, p, keys[i : i + size])
            ops = [IndexOp(doc_id, version, doc) for doc_id, doc, version in documents]
            counts.update(await bulk_batched(index, alias, ops, cfg.opts))
    finally:
        await index.close()
        await store.close()
    return counts


def index_process(spark: SparkSession, cfg: IngestConfig, batch: Batch) -> dict[str, Any]:
    """Re-project every document the batch touched, per projection; ``JobError`` when a write failed."""
    rdd = ranges_rdd(spark, cfg, batch)
    if rdd is None:
        return {}
    names = tuple(cfg.aliases)
    touched = rdd.mapPartitions(functools.partial(_touched_task, cfg, names)).distinct().cache()
    out: dict[str, Any] = {}
    try:
        n = max(1, spark.sparkContext.defaultParallelism)
        for name, alias in cfg.aliases.items():
            items = touched.filter(functools.partial(_of_projection, name)).map(lambda t: (t[1], t[2]))
            task = functools.partial(_project_task, cfg, name, alias)
            counts: Counter[str] = Counter()
            for outcome, k in items.repartition(n).mapPartitions(task).collect():
                counts[outcome] += k
            out[name] = dict(counts)
            if counts.get("error"):
                raise JobError(
                    f"index {alias}: {counts['error']} documents of batch {batch.batch_id} not written"
                )
    finally:
        touched.unpersist()
    return out
