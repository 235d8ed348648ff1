"""Repair of an aggregate's tables where they differ from its recomputation (``spark_batch.aggregate_check``).

The divergent entities' recomputed documents go through ``ContributionIndex.bulk``, the
stream projector's own writer, at the entity's version mark (an entity no source row or mark
is left of: emptied at the highest version of its stored rows); then
``framework.aggregates.totals.recompute`` rewrites the totals of the divergent groups and of
those the contribution writes changed, at ``totals_version``, with the executor's clock: a
rewrite that changes a final window's totals counts one revision, an unchanged one keeps the
stored count.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from framework.aggregates.contributions import Changed, ContributionIndex
from framework.aggregates.tables import decode_measures
from framework.aggregates.totals import recompute, repair_version
from framework.core.aggregate import Aggregate, Group, parse_group_id, parse_series
from framework.core.sync import run_sync
from framework.jobs.kafka_ranges import RangeError, partition_bounds
from framework.runtime.change_feed import change_partition
from spark_batch.aggregate_check import AggregateRun
from spark_batch.aggregates import aggregate_of
from spark_batch.apps import JobError
from spark_batch.io import WriteOptions, with_retries
from stores.base import IndexOp
from stores.open import open_wide_store

__all__ = ["group_ends", "totals_version", "repair"]


async def group_ends(broker: str, topic: str, *, missing_ok: bool = False) -> dict[int, int]:
    """The end offset of every partition of the group topic ``topic``; ``JobError`` when the broker
    cannot be read, or has no such topic (``missing_ok``: ``{0: 0}``, one partition at offset 0,
    since a stream that creates the topic later writes every total above ``totals_version`` of
    it)."""
    try:
        bounds = await partition_bounds(broker, [topic])
    except RangeError:
        if missing_ok:
            return {0: 0}
        raise JobError(
            f"no group topic {topic!r} on {broker}: start the app's worker once (it creates it)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any client failure: one line
        raise JobError(
            f"broker {broker}: cannot read the ends of {topic!r}: {type(exc).__name__}: {exc}"
        ) from None
    return {p: end for (_, p), (_, end) in bounds.items()}


def totals_version(ends: Mapping[int, int], g: Group) -> int:
    """The version a repair writes the totals of ``g`` at: ``repair_version`` of the end offset of
    its group topic partition (read before the repair reads any group's contributions), twice the
    end plus one.

    The stream writes a group's totals at ``stream_version`` of the record announcing it, twice
    its offset plus two (``framework.aggregates.totals``). Every record below the end was
    announced, so its contributions written, before the repair reads them: the repair's totals
    include its change, and the stream's write for it is at most twice the end, below the
    repair's. The records announced later write from twice the end plus two up, strictly above
    the repair's: the stream's next write for the group, computed when it is processed, always
    replaces the repair's totals, never ties with them (a tie is won by the larger value, not the
    newer: a repaired 900 would shadow the stream's next 100). So the end is one version clock
    for the totals present, the deleted ones and the records not yet processed.

    Not the highest write time of the totals rows plus one: a deleted row's tombstone is not
    read back, so a row deleted above that maximum would stay deleted; and a maximum over the
    table mixes partitions whose offsets are unrelated, so a group of a partition far behind
    would be written above everything its stream writes for a long time, freezing its totals.
    One limit: the repair's own contribution writes are not announced on the group topic, so a
    record processed after the end was read but before those writes computes totals without
    them, above the repair's; the group's next change or a second check sets it right.
    """
    return repair_version(ends[change_partition(g.id, len(ends))])


def _documents(rows: Iterable[Any]) -> Iterator[IndexOp]:
    """``(entity, version, series, window, measures)`` rows sorted by entity, as one ``IndexOp`` per
    entity (its recomputed document, None when it has none)."""
    entity: str | None = None
    version = 0
    doc: dict[str, dict[str, float]] = {}
    for r in rows:
        if r[0] != entity:
            if entity is not None:
                yield IndexOp(entity, version, doc or None)
            entity, version, doc = r[0], int(r[1]), {}
        if r[2] is not None:
            doc[Group(tuple(parse_series(r[2])), int(r[3])).id] = decode_measures(r[4])
    if entity is not None:
        yield IndexOp(entity, version, doc or None)


def _contrib_repair_task(
    spec: str, name: str, store_url: str, opts: WriteOptions, part: Iterable[Any]
) -> Iterator[tuple[str, Any]]:
    """Executor: write each entity's recomputed contributions through ``ContributionIndex.bulk``;
    yields ``("written", entities)`` and ``("changed", group id)`` of each group the writes changed."""
    agg = aggregate_of(spec, name)
    ops = list(_documents(part))
    if not ops:
        return
    changed: list[str] = []

    async def announce(_: Aggregate, groups: Sequence[Changed]) -> None:
        changed.extend(g.id for g, _ in groups)

    async def run() -> None:
        store = await open_wide_store(store_url)
        try:
            index = ContributionIndex(store, [agg], announce)
            for i in range(0, len(ops), opts.batch_size):
                chunk = ops[i : i + opts.batch_size]
                await with_retries(functools.partial(index.bulk, agg.name, chunk), opts)
        finally:
            await store.close()

    run_sync(run())
    yield ("written", len(ops))
    yield from (("changed", gid) for gid in dict.fromkeys(changed))


def _totals_repair_task(
    spec: str, name: str, store_url: str, ends: Mapping[int, int], opts: WriteOptions, part: Iterable[str]
) -> Iterator[tuple[str, int]]:
    """Executor: ``recompute`` the totals of each group id at ``totals_version``; yields counts."""
    agg = aggregate_of(spec, name)
    groups = [parse_group_id(gid) for gid in part]
    if not groups:
        return

    async def run() -> int:
        store = await open_wide_store(store_url)
        try:
            live = 0
            for i in range(0, len(groups), opts.batch_size):
                chunk = {g: totals_version(ends, g) for g in groups[i : i + opts.batch_size]}
                live += await with_retries(functools.partial(recompute, store, agg, chunk), opts)
            return live
        finally:
            await store.close()

    live = run_sync(run())
    yield ("totals", live)
    yield ("totals_deleted", len(groups) - live)


def repair(
    spark: SparkSession,
    run: AggregateRun,
    *,
    store_url: str,
    ends: Mapping[int, int],
    partitions: int = 4,
    opts: WriteOptions | None = None,
) -> dict[str, int]:
    """Write the recomputed contributions of every divergent entity of ``run`` at its mark, then
    the totals of the divergent groups and of the groups those writes changed, at
    ``totals_version(ends, group)`` (``ends``: the group topic's end offset per partition,
    ``group_ends``, read before the repair starts). Returns the writes per kind.

    ``ContributionIndex.bulk`` skips an entity whose stored contributions record a higher mark
    than the one recomputed (only a write behind the pipeline's back puts one there): those stay,
    and the next check reports them again."""
    if not ends:
        raise JobError(f"aggregate {run.report.aggregate}: the group topic has no partition")
    started = time.monotonic()
    name, opts = run.report.aggregate, opts or WriteOptions()
    divergent = run.groups.select("series", "window").collect()  # before any write
    todo = run.entities.select("entity", F.when(F.col("key").isNull(), F.col("floor"))
                               .otherwise(F.col("version")).alias("at"))  # fmt: skip
    docs = todo.join(run.recomputed.select("entity", "series", "window", "measures"), "entity", "left")
    ordered = docs.select("entity", "at", "series", "window", "measures").repartition(partitions, "entity")
    task = functools.partial(_contrib_repair_task, run.app, name, store_url, opts)
    out = ordered.sortWithinPartitions("entity").rdd.map(tuple).mapPartitions(task).collect()
    written = sum(n for kind, n in out if kind == "written")
    changed = {gid for kind, gid in out if kind == "changed"}
    gids = sorted(changed | {Group(tuple(parse_series(r["series"])), int(r["window"])).id for r in divergent})
    counts = {"contributions": written, "totals": 0, "totals_deleted": 0}
    if gids:
        task2 = functools.partial(_totals_repair_task, run.app, name, store_url, dict(ends), opts)
        for kind, n in spark.sparkContext.parallelize(gids, partitions).mapPartitions(task2).collect():
            counts[kind] += n
    run.report.repair = counts
    run.report.repaired_seconds = time.monotonic() - started
    return counts
