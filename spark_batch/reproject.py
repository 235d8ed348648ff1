"""Projecting chosen hub rows into the index from Spark executors.

Repair, the reindex catch-up and the backfill's optional projection all send
hub ids here; each is projected by ``agents.indexer.project_hub``, the same
routine the streaming indexer runs: read the merged row and its log, then
index the whole document at its external version, or delete it when the row
has no live cell. The delete's version is at least the given floor (the
version of the document found in the index), so an orphan is really removed.
Writes are idempotent, so a repeated repair changes nothing.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Iterable, Iterator

from pyspark import RDD

from agents.indexer import project_hub
from spark_batch.io import WriteOptions, bounded, open_index, with_retries
from stores.open import open_wide_store

__all__ = ["reproject_task", "reproject"]


def reproject_task(
    store_url: str,
    es_url: str,
    tombstones: str,
    target: str,
    opts: WriteOptions,
    part: Iterable[tuple[str, int]],
) -> Iterator[tuple[str, int]]:
    """Executor: project each ``(hub_id, floor_version)``; yields (action, count) pairs."""

    async def run(items: list[tuple[str, int]]) -> Counter[str]:
        store = await open_wide_store(store_url)
        index = open_index(es_url, tombstones)
        try:

            async def one(item: tuple[str, int]) -> str:
                call = functools.partial(project_hub, store, index, target, *item)
                action, _, _ = await with_retries(call, opts)
                return action

            return Counter(await bounded(items, one, opts.concurrency))
        finally:
            await index.close()
            await store.close()

    items = [(str(h), int(f or 0)) for h, f in part]
    if items:
        yield from asyncio.run(run(items)).items()


def reproject(
    pairs: RDD,
    *,
    store_url: str,
    es_url: str,
    tombstones: str,
    target: str,
    partitions: int,
    opts: WriteOptions | None = None,
) -> Counter[str]:
    """Project every ``(hub_id, floor_version)`` of ``pairs`` into ``target``; counts per action."""
    task = functools.partial(reproject_task, store_url, es_url, tombstones, target, opts or WriteOptions())
    counts: Counter[str] = Counter()
    for action, n in pairs.repartition(partitions).mapPartitions(task).collect():
        counts[action] += n
    return counts
