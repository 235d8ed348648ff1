"""The aggregates of a backfill (``converge spark backfill --project``): written as it projects documents.

A backfill writes source rows and the projections' version marks; an aggregate's contributions
and totals are derived from them. After the documents, every aggregate of the app is compared
with its recomputation from the store and what differs is written, by the code of ``converge
spark check --repair`` (``spark_batch.aggregate_check.check``, ``spark_batch.aggregate_repair.
repair``): the divergent entities' contributions at their version marks, the divergent groups'
totals at ``totals_version`` of the group topic's ends, read from the broker before the check
(above every total the stream wrote, below its next write). A group topic the broker does not
have yet (no worker of the app ever ran) counts as empty: the stream that creates it writes
above. The ends are also read before the backfill's first write (``require_ends``), so an
unreachable broker stops the job before it changes anything.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from framework.core.sync import run_sync
from spark_batch.aggregate_check import check
from spark_batch.aggregate_repair import group_ends, repair
from spark_batch.aggregates import require_aggregate_tables
from spark_batch.apps import load_app
from spark_batch.io import WriteOptions

__all__ = ["require_ends", "project_aggregates"]


def _ends(spec: str, broker: str) -> dict[str, dict[int, int]]:
    app = load_app(spec)
    return {a.name: run_sync(group_ends(broker, app.group_topic(a), missing_ok=True)) for a in app.aggregates}


def require_ends(spec: str, broker: str) -> None:
    """``JobError`` when the broker cannot tell the ends of the app's group topics."""
    _ends(spec, broker)


def project_aggregates(
    spark: SparkSession,
    *,
    app: str,
    store_url: str,
    broker: str,
    shards: int,
    opts: WriteOptions | None = None,
) -> dict[str, dict[str, int]]:
    """Write every aggregate of ``app`` where the store's tables differ from its recomputation;
    returns the writes per aggregate (``contributions``, ``totals``, ``totals_deleted``)."""
    aggregates = load_app(app).aggregates
    if not aggregates:
        return {}
    run_sync(require_aggregate_tables(store_url, aggregates, create=True))
    ends = _ends(app, broker)  # before any read of the contributions
    out: dict[str, dict[str, int]] = {}
    for a in aggregates:
        found = check(spark, app=app, name=a.name, store_url=store_url, shards=shards, sample=0)
        try:
            writes = {"contributions": 0, "totals": 0, "totals_deleted": 0}
            if not found.report.clean:
                writes = repair(
                    spark, found, store_url=store_url, ends=ends[a.name], partitions=shards, opts=opts
                )
            out[a.name] = writes
        finally:
            found.release()
    return out
