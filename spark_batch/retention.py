"""Retention on Spark: the store process of each domain's batch runs as ``shards`` executor tasks.

The driver does what ``framework.retention.run_retention`` does (the domain's
coordinator turn after its predecessor, the job checkpoints, the index
process re-projecting the pending partitions); only the scan-plan-write of
each table is spread: table after table in the domain's order (a table that
takes its tenant from the domain's table first), one Spark job per table,
each task retaining shard ``i`` of ``shards`` of the table's partitions
(``WideColumnStore.scan`` shards partition a table) through the same
``framework.retention.retain_domain`` as the embedded job. Each task writes
its own chunks; a retried task writes the same tombstones again (idempotent:
same cutoff, same versions).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.locks import DomainLocks
from framework.retention import RetentionRun, TableReport, ensure_tables, run_retention
from framework.retention.job import RetainDomain, retain_domain
from spark_batch.apps import load_app
from stores.base import SearchIndex
from stores.open import open_wide_store

__all__ = ["retention_task", "spark_retain", "spark_retention"]


def retention_task(
    store_url: str,
    app_spec: str,
    table: str,
    now_us: int,
    batch: int,
    job: str,
    shards: int,
    chunk: int,
    shard: int,
) -> list[dict[str, Any]]:
    """Executor side: retain shard ``shard`` of ``table``; its report as a dict (one element)."""
    app = load_app(app_spec)

    async def go() -> list[dict[str, Any]]:
        store = await open_wide_store(store_url)
        try:
            await ensure_tables(store, app)
            reports = await retain_domain(
                store, app, [table], now_us, batch=batch, job=job, chunk=chunk, shard=shard, shards=shards
            )
            return [r.to_dict() for r in reports]
        finally:
            await store.close()

    return asyncio.run(go())


def spark_retain(
    spark: SparkSession, store_url: str, app_spec: str, *, shards: int, chunk: int = 1000
) -> RetainDomain:
    """The ``retain`` of ``run_retention`` that runs each table as one Spark job of ``shards`` tasks."""

    async def retain(tables: Sequence[str], now_us: int, batch: int, job: str) -> list[TableReport]:
        reports = []
        for table in tables:
            started = time.perf_counter()
            task = functools.partial(
                retention_task, store_url, app_spec, table, now_us, batch, job, shards, chunk
            )

            def collect(task: Callable[[int], list[dict[str, Any]]] = task) -> list[dict[str, Any]]:
                return spark.sparkContext.parallelize(range(shards), shards).flatMap(task).collect()

            report = TableReport(table)
            for part in await asyncio.to_thread(collect):
                report.add(part)
            report.seconds = time.perf_counter() - started
            reports.append(report)
        return reports

    return retain


def spark_retention(
    spark: SparkSession,
    app_spec: str,
    store_url: str,
    *,
    checkpoints: CheckpointStore,
    locks: DomainLocks,
    index: Callable[[], SearchIndex] | None = None,
    predecessor: str | None = None,
    start_with: str | None = None,
    shards: int | None = None,
    clock: Callable[[], float] = time.time,
    settings: Any = None,
) -> RetentionRun:
    """One round of the retention job of ``app_spec`` with the store side on Spark (``shards``
    tasks per table, default the default parallelism); ``index`` opens the index (in the loop).
    An app's aggregates are re-projected into their contributions in the store, their changed
    groups announced on ``settings.broker`` (``framework.cli.job_turn.aggregate_targets``'s way)."""
    app = load_app(app_spec)
    n = shards or spark.sparkContext.defaultParallelism

    async def go() -> RetentionRun:
        store = await open_wide_store(store_url)
        opened = None if index is None else index()
        announcer = contributions = None
        if app.aggregates and settings is not None:
            from framework.aggregates.announce import KafkaAnnouncer
            from framework.aggregates.contributions import ContributionIndex

            announcer = KafkaAnnouncer(settings.broker, app.group_topic, settings.partitions)
            contributions = ContributionIndex(store, app.aggregates, announcer)
        try:
            return await run_retention(
                app,
                store,
                checkpoints=checkpoints,
                locks=locks,
                index=opened,
                aggregates=contributions,
                predecessor=predecessor,
                start_with=start_with,
                clock=clock,
                retain=spark_retain(spark, store_url, app_spec, shards=n),
            )
        finally:
            if announcer is not None:
                await announcer.close()
            if opened is not None:
                await opened.close()
            await store.close()

    return asyncio.run(go())
