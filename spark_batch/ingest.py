"""Micro-batch ingestion on Spark: Kafka offset ranges through an app's agents, exactly-once in effect.

A run of the job (``converge spark ingest`` or ``ingest``):

1. reads the job's checkpoints (``framework.jobs.JobCheckpoints``); every
   process that has not completed the current batch re-runs exactly that
   batch's recorded offset ranges, alone;
2. then, batch after batch: asks the broker for every partition's end,
   plans the next ranges from where the last batch ended (at most
   ``max_offsets`` per partition), records the batch (id + ranges) in the
   checkpoint store *before* running it, and runs the processes in order:
   ``store`` (the agents into the wide-column store), ``notifications`` (the
   notification table) and ``index`` (the app's projections), each recording
   its completion after its writes are durable;
3. stops when a batch would be empty, or after ``max_batches``.

A crash anywhere leaves at most one batch incomplete, in the processes after
the last checkpoint; the next run completes it there and nowhere else.
Executors read their ranges with the Kafka client (no connector jars) and
open the store and index from their URLs, like every batch job here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from framework.coordination import CheckpointStore
from framework.core.sync import run_sync
from framework.jobs.batches import Batch, BatchInput, JobCheckpoints
from framework.jobs.micro_batch import AfterProcess, JobProcess, JobRun, run_job
from spark_batch.apps import JobError, load_app
from spark_batch.backfill import prepare
from spark_batch.ingest_processes import IngestConfig, index_process, notification_process, store_process
from spark_batch.kafka_ranges import partition_bounds, plan_ranges
from stores.open import open_wide_store

__all__ = [
    "ingest",
    "ingest_processes",
    "notifications_available",
    "prepare_ingest",
    "app_topics",
    "print_run",
]

log = logging.getLogger(__name__)

Step = Callable[[SparkSession, IngestConfig, Batch], dict[str, Any]]


def notifications_available() -> bool:
    """True when ``framework.notifications`` provides ``notification_mutations``."""
    try:
        from framework import notifications
    except ImportError:
        return False
    return all(hasattr(notifications, n) for n in ("notification_mutations", "NOTIFICATION_TABLES"))


def app_topics(app_spec: str) -> list[str]:
    """The topics the app's agents consume (the job's default input)."""
    return sorted({a.topic for a in load_app(app_spec).agents})


def ingest_processes(cfg: IngestConfig, *, notifications: bool | None = None) -> list[tuple[str, Step]]:
    """The job's processes in order: ``store``; ``notifications`` (when available, unless turned
    off); ``index`` when the job has an index and projections to write."""
    steps: list[tuple[str, Step]] = [("store", store_process)]
    if notifications if notifications is not None else notifications_available():
        steps.append(("notifications", notification_process))
    if cfg.es_url and cfg.aliases:
        steps.append(("index", index_process))
    return steps


def prepare_ingest(
    cfg: IngestConfig,
    *,
    projection: str | None = None,
    alias: str | None = None,
    denylist_store: str | None = None,
) -> None:
    """Driver side, before Spark: the erasure deny-list of record (``backfill.prepare``), the app's
    tables, the notification table and every index."""
    prepare(
        cfg.app,
        cfg.store_url,
        projection=projection,
        es_url=cfg.es_url,
        alias=alias,
        tombstones=cfg.tombstones,
        denylist_store=denylist_store,
    )
    if notifications_available():
        from framework.notifications import NOTIFICATION_TABLES

        async def ensure() -> None:
            store = await open_wide_store(cfg.store_url)
            try:
                for table in NOTIFICATION_TABLES:
                    await store.ensure_table(table)
            finally:
                await store.close()

        run_sync(ensure())


def ingest(
    spark: SparkSession,
    cfg: IngestConfig,
    checkpoints: CheckpointStore,
    *,
    topics: Sequence[str],
    max_offsets: int | None = None,
    max_batches: int | None = None,
    apply_log: str | None = None,
    notifications: bool | None = None,
    after_process: AfterProcess | None = None,
) -> JobRun:
    """Repair the current batch where it lags, then ingest new batches of ``topics`` (see the
    module doc). ``JobError`` for a missing topic or an offset gap; a process's failure
    propagates, leaving its batch to the next run. ``after_process``: see ``run_job``."""
    if not topics:
        raise JobError("no topic to read: give --topic")
    steps = ingest_processes(cfg, notifications=notifications)

    def process(name: str, step: Step) -> JobProcess:
        async def run(batch: Batch) -> dict[str, Any]:
            log.info("job %s batch %d: %s", cfg.job, batch.batch_id, name)
            return await asyncio.to_thread(step, spark, cfg, batch)

        return JobProcess(name, run)

    try:
        job = JobCheckpoints(checkpoints, cfg.job, [name for name, _ in steps])
    except ValueError as exc:
        raise JobError(f"job {cfg.job!r}: {exc}") from None

    async def plan(previous: Batch | None) -> BatchInput | None:
        bounds = await partition_bounds(cfg.broker, topics)
        missing = {t for t, _ in (previous.input.ends() if previous else {})} - set(topics)
        if missing:
            raise JobError(f"job {cfg.job} read {sorted(missing)} before: keep every topic of a job")
        return plan_ranges(None if previous is None else previous.input, bounds, max_offsets)

    return run_sync(
        run_job(
            job,
            [process(n, s) for n, s in steps],
            plan,
            max_batches=max_batches,
            apply_log=apply_log,
            after_process=after_process,
        )  # fmt: skip
    )


def print_run(con: Any, run: JobRun) -> None:
    """What a run did, on a rich console: repaired processes, then each batch's reports."""
    for batch_id, names in sorted(run.repaired.items()):
        con.print(f"job {run.job}: batch {batch_id} repaired in {', '.join(names)}")
    for batch_id, reports in sorted(run.reports.items()):
        for name, report in reports.items():
            con.print(f"job {run.job}: batch {batch_id} {name}: {report}", markup=False)
    if not run.batches:
        con.print(f"job {run.job}: no new offsets")
