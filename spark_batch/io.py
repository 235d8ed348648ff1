"""Spark readers and partition writers over the project's own store adapters.

No Spark connector is involved: every executor task opens the store or index
from its URL (plain strings travel to the executors), reads or writes its
share and closes it again.

Readers: ``read_store_rows`` (one task per shard of the wide-column store's
scan: partition-hash shards on SQLite, token ranges on Cassandra) and
``read_index`` (one task per slice of a point-in-time scan of the index).
Rows stream through ``iterate_async`` in pages, so a task holds one page,
not its whole shard.

Writers: ``apply_batched`` (mutations, in units that succeed or fail
together, e.g. one event's) and ``bulk_batched`` (index operations) send
batches with a bounded number in flight and retry transient failures with
exponential back-off.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.core.mutations import Mutation
from spark_batch.codec import document_text, row_to_record
from stores.base import IndexOp, WideColumnStore
from stores.elasticsearch.index import ElasticsearchIndex
from stores.errors import PermanentStoreError, TransientStoreError
from stores.open import open_wide_store

__all__ = [
    "WriteOptions",
    "ROW_SCHEMA",
    "DOC_SCHEMA",
    "open_index",
    "iterate_async",
    "with_retries",
    "bounded",
    "Unit",
    "apply_batched",
    "bulk_batched",
    "read_store_rows",
    "read_index",
]

T = TypeVar("T")
R = TypeVar("R")

#: Row records (see ``spark_batch.codec``).
ROW_SCHEMA = StructType([StructField(n, StringType(), False) for n in ("table", "pk", "key", "cells")])
#: Index documents: id, external version and the canonical JSON of the source (``codec.document_text``).
DOC_SCHEMA = StructType(
    [
        StructField("doc_id", StringType(), False),
        StructField("version", LongType(), True),
        StructField("source", StringType(), False),
    ]
)
_PAGE = 1000


@dataclass(frozen=True)
class WriteOptions:
    """Batching, concurrency and retries of partition writers."""

    batch_size: int = 500
    concurrency: int = 4
    retries: int = 8
    backoff: float = 0.1
    max_backoff: float = 5.0

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.concurrency < 1 or self.retries < 0:
            raise ValueError("batch_size and concurrency must be positive, retries non-negative")


def open_index(es_url: str, tombstones: str = "native") -> ElasticsearchIndex:
    """An index adapter on ``es_url`` with the given delete mode (``document`` on noida-db)."""
    return ElasticsearchIndex.from_url(es_url, tombstones=tombstones, request_timeout=30.0)


def iterate_async(factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code (an executor task) on a private event loop."""
    loop = asyncio.new_event_loop()
    agen = factory()
    try:
        while True:
            try:
                item = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


async def pages(items: AsyncIterable[T], size: int = _PAGE) -> AsyncIterator[list[T]]:
    """``items`` in lists of up to ``size``."""
    page: list[T] = []
    async for item in items:
        page.append(item)
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


async def with_retries(call: Callable[[], Awaitable[T]], opts: WriteOptions) -> T:
    """``await call()``, retrying TransientStoreError up to ``opts.retries`` times with back-off."""
    delay = opts.backoff
    for attempt in itertools.count():
        try:
            return await call()
        except TransientStoreError:
            if attempt >= opts.retries:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, opts.max_backoff)
    raise AssertionError("unreachable")  # pragma: no cover


async def _each(items: Iterable[T] | AsyncIterable[T]) -> AsyncIterator[T]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item


async def bounded(
    items: Iterable[T] | AsyncIterable[T], fn: Callable[[T], Awaitable[R]], concurrency: int
) -> list[R]:
    """``fn`` over ``items`` with at most ``concurrency`` calls in flight; results in completion order."""
    results: list[R] = []
    pending: set[asyncio.Future[R]] = set()
    async for item in _each(items):
        pending.add(asyncio.ensure_future(fn(item)))
        if len(pending) >= concurrency:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            results += [t.result() for t in done]
    if pending:
        done, _ = await asyncio.wait(pending)
        results += [t.result() for t in done]
    return results


async def _chunks(
    items: Iterable[T] | AsyncIterable[T], size: int, weight: Callable[[T], int]
) -> AsyncIterator[list[T]]:
    chunk: list[T] = []
    n = 0
    async for item in _each(items):
        chunk.append(item)
        n += weight(item)
        if n >= size:
            yield chunk
            chunk, n = [], 0
    if chunk:
        yield chunk


#: A unit of mutations applied or rejected together (e.g. one event's), with a label.
Unit = tuple[str, list[Mutation]]


async def apply_batched(
    store: WideColumnStore,
    units: Iterable[Unit] | AsyncIterable[Unit],
    opts: WriteOptions,
    done: Callable[[Unit, BaseException | None], None],
) -> None:
    """Apply ``units`` in batches of about ``opts.batch_size`` mutations; ``done(unit, error)`` for each.

    A batch that fails permanently (``PermanentStoreError`` or a schema
    ``ValueError``) is applied again unit by unit, so only the bad units fail.
    """

    async def one(batch: list[Unit]) -> None:
        try:
            await with_retries(functools.partial(store.apply, [m for _, ms in batch for m in ms]), opts)
        except (PermanentStoreError, ValueError):
            for unit in batch:
                try:
                    await with_retries(functools.partial(store.apply, unit[1]), opts)
                except (PermanentStoreError, ValueError) as exc:
                    done(unit, exc)
                else:
                    done(unit, None)
            return
        for unit in batch:
            done(unit, None)

    await bounded(_chunks(units, opts.batch_size, lambda u: len(u[1])), one, opts.concurrency)


async def bulk_batched(
    index: ElasticsearchIndex,
    target: str,
    ops: Iterable[IndexOp] | AsyncIterable[IndexOp],
    opts: WriteOptions,
) -> Counter[str]:
    """Bulk-write ``ops`` into ``target``; counts of ``ok``, ``stale`` and ``error`` outcomes.

    Retryable item failures are sent again (up to ``opts.retries`` times);
    whole-request transient failures are retried by ``with_retries``.
    """

    async def one(batch: list[IndexOp]) -> Counter[str]:
        counts: Counter[str] = Counter()
        todo, delay = batch, opts.backoff
        for attempt in itertools.count():
            result = await with_retries(functools.partial(index.bulk, target, todo), opts)
            counts.update(i.outcome for i in result.items if i.outcome != "error" or not i.retryable)
            retry = {i.doc_id for i in result.retryable}
            todo = [op for op in todo if op.doc_id in retry]
            if not todo:
                return counts
            if attempt >= opts.retries:
                counts.update("error" for _ in todo)
                return counts
            await asyncio.sleep(delay)
            delay = min(delay * 2, opts.max_backoff)
        raise AssertionError("unreachable")  # pragma: no cover

    total: Counter[str] = Counter()
    for c in await bounded(_chunks(ops, opts.batch_size, lambda _: 1), one, opts.concurrency):
        total.update(c)
    return total


async def _store_pages(
    store_url: str, tables: Sequence[str], shard: int, shards: int
) -> AsyncIterator[list[tuple[str, str, str, str]]]:
    store = await open_wide_store(store_url)
    try:
        for table in tables:
            schema = store.schema(table)
            async for page in pages(store.scan(table, shard=shard, shards=shards)):
                yield [row_to_record(schema, r) for r in page]
    finally:
        await store.close()


def _store_rows_task(
    store_url: str, tables: Sequence[str], shards: int, part: Iterable[int]
) -> Iterator[tuple[str, str, str, str]]:
    for shard in part:
        for page in iterate_async(lambda: _store_pages(store_url, tables, shard, shards)):  # noqa: B023
            yield from page


def read_store_rows(spark: SparkSession, store_url: str, tables: Sequence[str], shards: int) -> DataFrame:
    """Row records (``ROW_SCHEMA``) of ``tables``, scanned in ``shards`` parallel tasks."""
    task = functools.partial(_store_rows_task, store_url, tuple(tables), shards)
    rdd = spark.sparkContext.parallelize(range(shards), shards).mapPartitions(task)
    return spark.createDataFrame(rdd, ROW_SCHEMA)


async def _index_pages(
    es_url: str, tombstones: str, alias: str, slice_id: int, slices: int, page_size: int
) -> AsyncIterator[list[tuple[str, int | None, str]]]:
    index = open_index(es_url, tombstones)
    try:
        hits = index.scan(alias, slice_id=slice_id, slices=slices, page_size=page_size)
        async for page in pages(hits, page_size):
            yield [(h.doc_id, h.version, document_text(h.source)) for h in page]
    finally:
        await index.close()


def _index_task(
    es_url: str, tombstones: str, alias: str, slices: int, page_size: int, part: Iterable[int]
) -> Iterator[tuple[str, int | None, str]]:
    for slice_id in part:
        args = (es_url, tombstones, alias, slice_id, slices, page_size)
        for page in iterate_async(lambda: _index_pages(*args)):  # noqa: B023
            yield from page


def read_index(
    spark: SparkSession,
    es_url: str,
    alias: str,
    slices: int,
    *,
    tombstones: str = "native",
    page_size: int = 10_000,
) -> DataFrame:
    """Documents of ``alias`` (``DOC_SCHEMA``) from ``slices`` parallel sliced point-in-time scans.

    Refresh the index first: a scan sees only refreshed writes. Large pages
    matter: each ``search_after`` page costs noida-db a pass over the index.
    """
    task = functools.partial(_index_task, es_url, tombstones, alias, slices, page_size)
    rdd = spark.sparkContext.parallelize(range(slices), slices).mapPartitions(task)
    return spark.createDataFrame(rdd, DOC_SCHEMA)
