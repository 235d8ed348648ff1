"""Zero-downtime reindex of one app projection: build ``{alias}-v(N+1)`` from the store, swap the alias.

1. Create the next generation with the projection's mappings (or new ones)
   beside the one the alias serves; the stream keeps writing through the
   alias into the old index.
2. Build: every scan shard projects its partitions and bulk-writes the
   documents with their versions into the new index.
3. Catch-up: a convergence check of the store against the new index, then a
   repair of what it finds. Rows changed since the build read them carry
   *source* versions, not arrival times, so no version filter can find them:
   the comparison can.
4. Swap the alias atomically; from now on the stream writes into the new index.
5. Catch-up again, now through the alias: this closes the window between the
   first catch-up and the swap (a change whose index write went to the old
   index is in the store before the swap, so this scan sees it). External
   versions make the build, the catch-ups and the stream commute.

The old index is kept for rollback (swap the alias back) unless ``drop_old``.

The new generation records the store it is built from (``stores.identity``: the store's
identity, written first when the store has none, in the index's ``_meta``): a reindex is how an
index is re-paired with a store, e.g. after a backfill into a fresh store. Its catch-ups repair
from that store, so they pass the pairing and are not bounded (the old index is kept).
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from framework.core.sync import run_sync
from spark_batch.apps import JobError, load_app, one, projection_of, require_tables
from spark_batch.convergence import check, repair
from spark_batch.io import WriteOptions, bulk_batched, open_index
from spark_batch.progress import JobProgress
from spark_batch.projection import shard_documents
from stores.base import IndexOp
from stores.identity import ensure_store_identity, source_of, with_source
from stores.open import open_wide_store

__all__ = ["ReindexReport", "reindex", "next_generation", "build_task"]

_GENERATION = re.compile(r"-v([0-9]+)$")


@dataclass
class ReindexReport:
    """What a reindex did: indices, documents written per phase, duration."""

    alias: str
    old_indices: list[str]
    new_index: str
    projection: str = ""
    built: dict[str, int] = field(default_factory=dict)
    catch_up: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "projection": self.projection,
            "alias": self.alias,
            "old_indices": self.old_indices,
            "new_index": self.new_index,
            "built": self.built,
            "catch_up": self.catch_up,
            "dropped": self.dropped,
            "seconds": round(self.seconds, 3),
        }


async def next_generation(es_url: str, tombstones: str, alias: str) -> tuple[list[str], int]:
    """The indices ``alias`` serves and the first unused generation above them."""
    index = open_index(es_url, tombstones)
    try:
        current = await index.alias_indices(alias)
        gens = [int(m.group(1)) for name in current if (m := _GENERATION.search(name))]
        gen = max(gens, default=0) + 1
        while await index.client.indices.exists(index=f"{alias}-v{gen}"):
            gen += 1
        return current, gen
    finally:
        await index.close()


def build_task(
    app: str,
    projection: str,
    store_url: str,
    es_url: str,
    tombstones: str,
    target: str,
    shards: int,
    opts: WriteOptions,
    part: Iterable[int],
) -> Iterator[tuple[str, int]]:
    """Executor: project the partitions of the given shards and bulk-write their documents into ``target``."""
    p = projection_of(app, projection)

    async def run(shard: int) -> Counter[str]:
        store = await open_wide_store(store_url)
        index = open_index(es_url, tombstones)
        try:
            docs = shard_documents(store, p, shard, shards)
            ops = (IndexOp(d, v, doc) async for _, (d, doc, v) in docs if doc is not None)
            return await bulk_batched(index, target, ops, opts)
        finally:
            await index.close()
            await store.close()

    counts: Counter[str] = Counter()
    for shard in part:
        counts.update(asyncio.run(run(shard)))
    yield from counts.items()


async def _create(
    es_url: str, tombstones: str, alias: str, mappings: Mapping[str, Any], gen: int, store_url: str, app: str
) -> str:
    """Create generation ``gen`` of ``alias``, recording the store at ``store_url`` as its source."""
    store = await open_wide_store(store_url)
    try:
        identity = await ensure_store_identity(store, app)
    finally:
        await store.close()
    index = open_index(es_url, tombstones)
    try:
        return await index.ensure_index(
            alias, with_source(mappings, source_of(identity, store_url)), generation=gen
        )
    finally:
        await index.close()


async def _swap(es_url: str, tombstones: str, alias: str, new: str, drop: bool) -> list[str]:
    """Point ``alias`` at ``new``; the old indices dropped (when ``drop``)."""
    index = open_index(es_url, tombstones)
    try:
        left = await index.swap_alias(alias, new)
        dropped = []
        if drop:
            for old in left:
                await index.client.indices.delete(index=old)
                dropped.append(old)
        return dropped
    finally:
        await index.close()


@dataclass(frozen=True)
class _Sources:
    """What a reindex projects, where it reads and writes, and how."""

    app: str
    projection: str
    store_url: str
    es_url: str
    tombstones: str
    shards: int
    opts: WriteOptions
    progress: JobProgress | None


def _catch_up(spark: SparkSession, src: _Sources, target: str, phase: str) -> dict[str, Any]:
    """Check the store against ``target`` and repair what differs; the check's report."""
    run = check(
        spark,
        app=src.app,
        projection=src.projection,
        alias=target,
        store_url=src.store_url,
        es_url=src.es_url,
        tombstones=src.tombstones,
        shards=src.shards,
        slices=src.shards,
        progress=src.progress,
    )
    try:
        if not run.report.clean:
            repair(
                spark,
                run,
                store_url=src.store_url,
                es_url=src.es_url,
                tombstones=src.tombstones,
                partitions=src.shards,
                opts=src.opts,
                progress=src.progress,
            )
    finally:
        run.release()
    return {"phase": phase, **run.report.to_dict()}


def reindex(
    spark: SparkSession,
    *,
    app: str,
    projection: str | None = None,
    store_url: str,
    es_url: str,
    alias: str | None = None,
    mappings: Mapping[str, Any] | None = None,
    tombstones: str = "native",
    shards: int = 4,
    drop_old: bool = False,
    opts: WriteOptions | None = None,
    progress: JobProgress | None = None,
) -> ReindexReport:
    """Rebuild the index behind ``alias`` (default: the projection's) from the store with the
    projection's mappings (or ``mappings``) and swap the alias to it.

    ``projection`` may be omitted when the app ``app`` (``MODULE:ATTR``) has
    only one. ``JobError`` before any Spark job for an app, projection or
    store it cannot use, or an alias that does not exist.
    """
    started = time.monotonic()
    opts = opts or WriteOptions()
    p = one(load_app(app), projection)
    alias = alias or p.alias
    run_sync(require_tables(store_url, [p]))
    old, gen = run_sync(next_generation(es_url, tombstones, alias))
    if not old:
        raise JobError(
            f"alias {alias!r} does not exist: nothing to reindex (a backfill --project creates it)"
        )
    chosen = p.mappings if mappings is None else mappings
    new = run_sync(_create(es_url, tombstones, alias, chosen, gen, store_url, load_app(app).name))
    report = ReindexReport(alias, old, new, p.name)
    if progress is not None:
        progress.phase(f"building {new}")
    task = functools.partial(build_task, app, p.name, store_url, es_url, tombstones, new, shards, opts)
    built: Counter[str] = Counter()
    for outcome, n in spark.sparkContext.parallelize(range(shards), shards).mapPartitions(task).collect():
        built[outcome] += n
    report.built = dict(built)
    src = _Sources(app, p.name, store_url, es_url, tombstones, shards, opts, progress)
    report.catch_up.append(_catch_up(spark, src, new, "before swap"))
    if progress is not None:
        progress.phase(f"swapping {alias} -> {new}")
    report.dropped = run_sync(_swap(es_url, tombstones, alias, new, drop_old))
    report.catch_up.append(_catch_up(spark, src, alias, "after swap"))
    report.seconds = time.monotonic() - started
    return report
