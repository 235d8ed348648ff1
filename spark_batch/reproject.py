"""Projecting chosen partitions of an app's projection into the index from Spark executors.

Repair, the reindex catch-up and the backfill's ``--project`` send
``(doc_id, key, floor)`` items here; each partition is projected by
``framework.runtime.projector.project_partition``, the routine the stream's
projector runs: read the partition's source rows and version mark, then
index the whole document at its version, or delete it when there is none.
The delete's version is at least ``floor`` (the version of the document
found in the index), so an orphan is really removed. An item without a key
(an index document no partition of the store maps to) is deleted at
``floor``. Writes are idempotent, so a repeated repair changes nothing.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Iterable, Iterator

from pyspark import RDD

from framework.runtime.projector import project_partition, write_document
from spark_batch.apps import projection_of
from spark_batch.codec import key_from_json
from spark_batch.io import WriteOptions, bounded, open_index, with_retries
from stores.open import open_wide_store

__all__ = ["reproject_task", "reproject"]

#: ``(doc_id, partition key JSON or None, floor version)``.
Item = tuple[str, str | None, int]


def reproject_task(
    app: str,
    projection: str,
    store_url: str,
    es_url: str,
    tombstones: str,
    target: str,
    opts: WriteOptions,
    part: Iterable[Item],
) -> Iterator[tuple[str, int]]:
    """Executor: project each item into ``target``; yields (action, count) pairs."""
    p = projection_of(app, projection)

    async def run(items: list[Item]) -> Counter[str]:
        store = await open_wide_store(store_url)
        index = open_index(es_url, tombstones)
        try:

            async def one(item: Item) -> str:
                doc_id, key, floor = item
                if key is None:
                    call = functools.partial(write_document, index, target, (doc_id, None, 0), floor)
                else:
                    call = functools.partial(
                        project_partition, store, index, p, key_from_json(key), alias=target, floor=floor
                    )
                action, _ = await with_retries(call, opts)
                return action

            return Counter(await bounded(items, one, opts.concurrency))
        finally:
            await index.close()
            await store.close()

    items = [(str(d), None if k is None else str(k), int(f or 0)) for d, k, f in part]
    if items:
        yield from asyncio.run(run(items)).items()


def reproject(
    items: RDD,
    *,
    app: str,
    projection: str,
    store_url: str,
    es_url: str,
    tombstones: str,
    target: str,
    partitions: int,
    opts: WriteOptions | None = None,
) -> Counter[str]:
    """Project every ``(doc_id, key, floor)`` of ``items`` into ``target``; counts per action."""
    task = functools.partial(
        reproject_task, app, projection, store_url, es_url, tombstones, target, opts or WriteOptions()
    )
    counts: Counter[str] = Counter()
    for action, n in items.repartition(partitions).mapPartitions(task).collect():
        counts[action] += n
    return counts
