"""The convergence check: wide-column rows against their search projections, and its repair.

The store side is the projection of every hub row (``spark_batch.projection``),
as ``(doc_id, version, digest)``; the index side is every visible document of
the alias (sliced point-in-time scans), digested the same way. A full outer
join on ``doc_id`` sorts each divergent document into one category:

- ``missing``: the row has a document, the index has none;
- ``stale``: the index holds a lower version than the row's projection;
- ``orphaned``: the index holds a document whose row was deleted or never existed;
- ``content``: same version, different content;
- ``ahead``: the index holds a higher version than the row (a write that raced
  the scan, or an index written behind the pipeline's back; repair cannot
  lower an external version).

Either side may come from Parquet instead (``read_store_rows`` /
``read_index`` output), for data the embedded index cannot hold. ``repair``
re-projects the divergent rows (``spark_batch.reproject``); a second check is
then clean unless the stream changed rows meanwhile.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.core.sync import run_sync
from spark_batch.io import WriteOptions, open_index, read_index
from spark_batch.progress import JobProgress
from spark_batch.projection import expected_task, records_expected_task
from spark_batch.reproject import reproject

__all__ = [
    "CATEGORIES",
    "EXPECTED_SCHEMA",
    "CheckReport",
    "CheckRun",
    "expected_documents",
    "expected_from_records",
    "index_digests",
    "classify",
    "check",
    "repair",
]

CATEGORIES = ("missing", "stale", "orphaned", "content", "ahead")
EXPECTED_SCHEMA = StructType(
    [
        StructField("doc_id", StringType(), False),
        StructField("version", LongType(), False),
        StructField("digest", StringType(), False),
    ]
)


@dataclass
class CheckReport:
    """What a check found: counts and sample keys per category, and the sizes compared."""

    target: str
    counts: dict[str, int]
    samples: dict[str, list[str]]
    expected_docs: int
    index_docs: int
    seconds: float
    repair: dict[str, int] | None = None
    repaired_seconds: float | None = None

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    @property
    def divergent(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "clean": self.clean,
            "expected_docs": self.expected_docs,
            "index_docs": self.index_docs,
            "seconds": round(self.seconds, 3),
            "counts": self.counts,
            "samples": self.samples,
        }
        if self.repair is not None:
            out["repair"] = {"actions": self.repair, "seconds": round(self.repaired_seconds or 0.0, 3)}
        return out


@dataclass
class CheckRun:
    """A finished check: its report and the divergent documents (cached until ``release``)."""

    report: CheckReport
    divergent: DataFrame
    _cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def expected_documents(spark: SparkSession, store_url: str, shards: int) -> DataFrame:
    """``(doc_id, version, digest)`` of every hub row's projection, one task per scan shard."""
    task = functools.partial(expected_task, store_url, shards)
    rdd = spark.sparkContext.parallelize(range(shards), shards).mapPartitions(task)
    return spark.createDataFrame(rdd, EXPECTED_SCHEMA)


def expected_from_records(spark: SparkSession, rows: DataFrame, partitions: int) -> DataFrame:
    """The same from row records (``io.ROW_SCHEMA``, e.g. a Parquet export), grouped by partition key."""
    grouped = rows.repartition(partitions, "pk").sortWithinPartitions("pk")
    return spark.createDataFrame(grouped.rdd.mapPartitions(records_expected_task), EXPECTED_SCHEMA)


def index_digests(docs: DataFrame) -> DataFrame:
    """``(doc_id, version, digest)`` of index documents (``io.DOC_SCHEMA``)."""
    return docs.select("doc_id", "version", F.sha1(F.col("source")).alias("digest"))


def _category() -> Column:
    ev, av = F.col("expected_version"), F.col("index_version")
    return (
        F.when(F.col("in_index").isNull(), "missing")
        .when(F.col("in_store").isNull(), "orphaned")
        .when(av.isNull() | (av < ev), "stale")
        .when(av > ev, "ahead")
        .when(F.col("expected_digest") != F.col("index_digest"), "content")
    )


def classify(expected: DataFrame, actual: DataFrame) -> DataFrame:
    """``(doc_id, category, expected_version, index_version)``; category is null when equal."""
    e = expected.select(
        "doc_id",
        F.col("version").alias("expected_version"),
        F.col("digest").alias("expected_digest"),
        F.lit(True).alias("in_store"),
    )
    a = actual.select(
        "doc_id",
        F.col("version").alias("index_version"),
        F.col("digest").alias("index_digest"),
        F.lit(True).alias("in_index"),
    )
    joined = e.join(a, "doc_id", "full_outer")
    return joined.select(
        "doc_id", _category().alias("category"), "expected_version", "index_version", "in_store", "in_index"
    )


def check(
    spark: SparkSession,
    *,
    alias: str,
    store_url: str | None = None,
    store_parquet: str | None = None,
    es_url: str | None = None,
    index_parquet: str | None = None,
    tombstones: str = "native",
    shards: int = 4,
    slices: int = 4,
    sample: int = 10,
    page_size: int = 10_000,
    progress: JobProgress | None = None,
) -> CheckRun:
    """Compare the store's projections with the index behind ``alias`` (or the Parquet inputs)."""
    if (store_url is None) == (store_parquet is None) or (es_url is None) == (index_parquet is None):
        raise ValueError("give exactly one store source and exactly one index source")
    started = time.monotonic()
    if progress is not None:
        progress.phase("scanning store and index")
    if store_url is not None:
        expected = expected_documents(spark, store_url, shards)
    else:
        expected = expected_from_records(spark, spark.read.parquet(store_parquet), shards)
    if es_url is not None:
        run_sync(_refresh(es_url, tombstones, alias))
        docs = read_index(spark, es_url, alias, slices, tombstones=tombstones, page_size=page_size)
    else:
        docs = spark.read.parquet(index_parquet)
    classified = classify(expected, index_digests(docs)).persist(StorageLevel.MEMORY_AND_DISK)
    totals = (
        classified.groupBy("category")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count("in_store").alias("stored"),
            F.count("in_index").alias("indexed"),
        )
        .collect()
    )
    counts = {c: 0 for c in CATEGORIES}
    expected_docs = index_docs = 0
    for r in totals:
        expected_docs += r["stored"]
        index_docs += r["indexed"]
        if r["category"] is not None:
            counts[r["category"]] = r["n"]
    divergent = classified.filter(F.col("category").isNotNull())
    samples = _samples(divergent, sample) if any(counts.values()) else {}
    report = CheckReport(
        alias,
        counts,
        {c: samples.get(c, []) for c in CATEGORIES},
        expected_docs,
        index_docs,
        time.monotonic() - started,
    )
    return CheckRun(report, divergent, [classified])


async def _refresh(es_url: str, tombstones: str, alias: str) -> None:
    index = open_index(es_url, tombstones)
    try:
        await index.refresh(alias)
    finally:
        await index.close()


def _samples(divergent: DataFrame, n: int) -> dict[str, list[str]]:
    if n <= 0:
        return {}
    rank = F.row_number().over(Window.partitionBy("category").orderBy("doc_id"))
    rows = divergent.select("category", "doc_id", rank.alias("rank")).filter(F.col("rank") <= n).collect()
    out: dict[str, list[str]] = {}
    for r in sorted(rows, key=lambda r: (r["category"], r["rank"])):
        out.setdefault(r["category"], []).append(r["doc_id"])
    return out


def repair(
    spark: SparkSession,
    run: CheckRun,
    *,
    store_url: str,
    es_url: str,
    tombstones: str = "native",
    target: str | None = None,
    partitions: int = 4,
    opts: WriteOptions | None = None,
    progress: JobProgress | None = None,
) -> Counter[str]:
    """Re-project every divergent row of ``run`` into ``target`` (default: the checked alias).

    Returns the writes attempted per action (``index``/``delete``); an ``ahead``
    document stays as it is, since the index rejects the lower version.
    """
    started = time.monotonic()
    if progress is not None:
        progress.phase(f"repairing {run.report.divergent} documents")
    pairs = run.divergent.select("doc_id", F.coalesce("index_version", F.lit(0))).rdd.map(tuple)
    actions = reproject(
        pairs,
        store_url=store_url,
        es_url=es_url,
        tombstones=tombstones,
        target=target or run.report.target,
        partitions=partitions,
        opts=opts,
    )
    run.report.repair = dict(actions)
    run.report.repaired_seconds = time.monotonic() - started
    return actions
