"""ID mutation on Spark: the collapse grouped per tenant and the moves spread over tasks.

The driver runs ``framework.idmutation.run_id_mutation`` (the coordinated
turn on every owner table, the job checkpoints, the requests from Kafka, the
map table and topic, the sweep, the index process); two of its steps run on
Spark:

- the collapse: the touched tenants' stored requests become a DataFrame,
  grouped by tenant, each group collapsed by ``applyInPandas`` with the same
  ``framework.idmutation.collapse`` (connected components by its union-find:
  see BENCHMARKS.md for why not networkx, scipy or GraphFrames);
- the moves: the batch's changed entries are split into ``shards`` tasks,
  each opening the store from its URL and calling ``apply_id_map`` on its
  share with the same notification and re-projection writes, in two Spark
  jobs: first every share's recorded cells routed again (phase ``routes``),
  then every share's partitions moved (phase ``cells``), so no task reads a
  partition before the cells routed out of it are gone. A retried task
  writes the same cells again (idempotent: same versions).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.locks import DomainLocks
from framework.erasure.screen import screen_verdict
from framework.idmutation.apply import PHASES, ApplyReport, apply_id_map
from framework.idmutation.collapse import Interval, collapse
from framework.idmutation.job import IdMapRun, config_of, run_id_mutation
from framework.idmutation.requests import IdRequest
from framework.idmutation.steps import Applier, Collapser, StepContext, writes_extra
from framework.idmutation.tables import decode_intervals, encode_intervals
from framework.idmutation.topic import KafkaLog
from framework.jobs.batches import Batch
from spark_batch.apps import load_app
from stores.base import SearchIndex
from stores.open import open_wide_store

__all__ = ["collapse_group", "spark_collapser", "spark_applier", "apply_task", "spark_id_mutation"]

_REQUESTS = "tenant string, request_id string, executed_at long, op string, old_id string, new_id string"
_MAP = "tenant string, id string, intervals string"
_COLUMNS = ["tenant", "request_id", "executed_at", "op", "old_id", "new_id"]


def collapse_group(pdf: pd.DataFrame) -> pd.DataFrame:
    """Executor side: one tenant's requests (a pandas group) to its map entries."""
    requests = [
        IdRequest(executed_at=int(at), request_id=rid, tenant=tenant, op=op, old_id=old,
                  new_id=None if new is None or (isinstance(new, float) and pd.isna(new)) else new)
        for tenant, rid, at, op, old, new in pdf[_COLUMNS].itertuples(index=False, name=None)
    ]  # fmt: skip
    out = collapse(requests)
    return pd.DataFrame(
        {
            "tenant": [t for t, _ in out],
            "id": [i for _, i in out],
            "intervals": [encode_intervals(v) for v in out.values()],
        },
        columns=["tenant", "id", "intervals"],
    )


def spark_collapser(spark: SparkSession, partitions: int) -> Collapser:
    """The ``collapser`` of ``run_id_mutation`` that collapses each tenant in a Spark group."""

    def collapser(requests: Sequence[IdRequest]) -> Mapping[tuple[str, str], Sequence[Interval]]:
        if not requests:
            return {}
        tuples = [(r.tenant, r.request_id, r.executed_at, r.op, r.old_id, r.new_id) for r in requests]
        pdf = pd.DataFrame(tuples, columns=_COLUMNS)
        df = spark.createDataFrame(pdf, _REQUESTS).repartition(partitions, "tenant")
        rows = df.groupBy("tenant").applyInPandas(collapse_group, _MAP).collect()
        return {(r["tenant"], r["id"]): decode_intervals(r["intervals"]) for r in rows}

    return collapser


def apply_task(store_url: str, app_spec: str, job: str, batch_json: str,
               entries: Iterable[tuple[str, str, str]],
               phases: Sequence[str] = PHASES) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Executor side: apply ``phases`` of one share of a batch's changed entries; its counts."""
    collapsed = {(t, i): decode_intervals(iv) for t, i, iv in entries}
    if not collapsed:
        return iter(())
    app = load_app(app_spec)
    batch = Batch.from_json(batch_json)

    async def go() -> dict[str, Any]:
        store = await open_wide_store(store_url)
        try:
            for schema in app.tables:
                await store.ensure_table(schema)
            ctx = StepContext(app, config_of(app), store, None)
            extra = writes_extra(ctx, job, batch)
            erased = await screen_verdict(store, app)  # erased subjects' records are not routed
            report = await apply_id_map(
                store, ctx.config, collapsed, extra=extra, phases=phases, erased=erased
            )
            return {**report.to_dict(), "rows_touched": report.rows_touched}
        finally:
            await store.close()

    return iter([asyncio.run(go())])


def spark_applier(spark: SparkSession, store_url: str, app_spec: str, *, shards: int) -> Applier:
    """The ``applier`` of ``run_id_mutation`` that spreads the moves over ``shards`` Spark tasks."""

    async def applier(
        job: str, batch: Batch, collapsed: Mapping[tuple[str, str], Sequence[Interval]]
    ) -> ApplyReport:
        started = time.perf_counter()
        entries = [(t, i, encode_intervals(v)) for (t, i), v in sorted(collapsed.items())]
        text = batch.to_json()

        def collect(phase: str) -> list[dict[str, Any]]:
            rdd = spark.sparkContext.parallelize(entries, max(1, min(shards, len(entries))))
            return rdd.mapPartitions(
                lambda part: apply_task(store_url, app_spec, job, text, part, (phase,))
            ).collect()

        report = ApplyReport()
        for phase in PHASES if entries else ():  # every share's routes before any share's cells
            for part in await asyncio.to_thread(collect, phase):
                report.partitions_read += part["partitions_read"]
                report.cells_moved += part["cells_moved"]
                report.cells_deleted += part["cells_deleted"]
                report.rerouted += part["rerouted"]
                report.unconverged += part["unconverged"]
                report.touched_elsewhere += part["rows_touched"]
        report.seconds = time.perf_counter() - started
        return report

    return applier


def spark_id_mutation(
    spark: SparkSession,
    app_spec: str,
    store_url: str,
    *,
    checkpoints: CheckpointStore,
    locks: DomainLocks,
    broker: str,
    index: Callable[[], SearchIndex] | None = None,
    dlq_root: str | None = None,
    predecessor: str | None = None,
    start_with: str | None = None,
    until_idle: bool = False,
    shards: int | None = None,
    settle: float = 30.0,
    clock: Callable[[], float] = time.time,
) -> IdMapRun:
    """One turn of the ID mutation job of ``app_spec`` with its collapse and moves on Spark."""
    from framework.dlq import DeadLetterWAL

    app = load_app(app_spec)
    n = shards or spark.sparkContext.defaultParallelism

    async def go() -> IdMapRun:
        store = await open_wide_store(store_url)
        opened = None if index is None else index()
        wal = None if dlq_root is None else await asyncio.to_thread(DeadLetterWAL, dlq_root)
        try:
            return await run_id_mutation(
                app, store, checkpoints=checkpoints, locks=locks, log=KafkaLog(broker), index=opened,
                dlq=wal, predecessor=predecessor, start_with=start_with, until_idle=until_idle,
                settle=settle, clock=clock, collapser=spark_collapser(spark, n),
                applier=spark_applier(spark, store_url, app_spec, shards=n), screen=screen_verdict,
            )  # fmt: skip
        finally:
            if wal is not None:
                wal.close()
            if opened is not None:
                await opened.close()
            await store.close()

    return asyncio.run(go())
