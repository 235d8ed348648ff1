"""The convergence check: an app projection's source rows against the index, and its repair.

The store side is the projection of every partition of its source tables
(``spark_batch.projection``), as ``(doc_id, key, version, digest)``, the
digest null where the partition has no document; the index side is every
visible document of the alias (sliced point-in-time scans), digested the
same way (``codec.digest``: SHA-1 of ``json_codec.canonical``, the rule the
change verifier compares documents by, so ``2`` and ``2.0`` differ in both).
A full outer join on ``doc_id`` sorts each divergent document
into one category:

- ``missing``: the partition has a document, the index has none;
- ``stale``: the index holds a lower version than the partition's document;
- ``orphaned``: the index holds a document the store has none for (its rows
  were deleted, ``build`` gives none, or they never existed);
- ``content``: same version, different content;
- ``ahead``: the index holds a higher version than the partition (a write
  that raced the scan, or an index written behind the pipeline's back;
  repair cannot lower an external version).

One pass over the join counts every category and both sides (a Spark
observation) while caching only the divergent documents, which the samples
and ``repair`` read.

Either side may come from Parquet instead (``read_store_rows`` /
``read_index`` output), for data the embedded index cannot hold. ``repair``
re-projects the divergent partitions (``spark_batch.reproject``); a second
check is then clean unless the stream changed rows meanwhile.

Two guards keep a repair from deleting an index it was not meant for (``converge spark check``
runs both): ``require_source`` refuses a store that is not the one the index was built from
(``stores.identity``), before Spark starts; ``repair_refusal`` refuses a repair that would
delete more documents than the bound allows (``framework.core.repair_guard``), unless forced.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.core.repair_guard import DeleteBound
from framework.core.sync import run_sync
from spark_batch.apps import load_app, one, projection_of, require_tables, tables_of
from spark_batch.codec import ROW_FIELDS
from spark_batch.io import WriteOptions, open_index, read_index
from spark_batch.progress import JobProgress
from spark_batch.projection import expected_task, records_expected_task
from spark_batch.reproject import reproject
from stores.identity import require_pairing
from stores.open import open_wide_store, sqlite_path

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
    "require_source",
    "repair_refusal",
]

CATEGORIES = ("missing", "stale", "orphaned", "content", "ahead")
EXPECTED_SCHEMA = StructType(
    [
        StructField("doc_id", StringType(), False),
        StructField("key", StringType(), False),
        StructField("version", LongType(), False),
        StructField("digest", StringType(), True),
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
    projection: str = ""
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
            "projection": self.projection,
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
    """A finished check of one projection: its report and the divergent documents (cached until
    ``release``), with the app and projection a repair re-projects them with."""

    report: CheckReport
    divergent: DataFrame
    app: str
    projection: str
    _cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def expected_documents(
    spark: SparkSession, app: str, projection: str, store_url: str, shards: int
) -> DataFrame:
    """``EXPECTED_SCHEMA`` rows of every partition of ``projection``, one task per scan shard."""
    task = functools.partial(expected_task, app, projection, store_url, shards)
    return spark.range(0, shards, 1, shards).mapInArrow(task, EXPECTED_SCHEMA)


def expected_from_records(
    spark: SparkSession, app: str, projection: str, rows: DataFrame, partitions: int
) -> DataFrame:
    """The same from row records (``io.ROW_SCHEMA``, e.g. a Parquet export), grouped by partition key
    and projected in Arrow batches."""
    names = [t.name for t in tables_of(projection_of(app, projection))]
    own = rows.select(*ROW_FIELDS).filter(F.col("table").isin(names))
    grouped = own.repartition(partitions, "pk").sortWithinPartitions("pk")
    return grouped.mapInArrow(functools.partial(records_expected_task, app, projection), EXPECTED_SCHEMA)


def index_digests(docs: DataFrame) -> DataFrame:
    """``(doc_id, version, digest)`` of index documents (``io.DOC_SCHEMA``)."""
    return docs.select("doc_id", "version", F.sha1(F.col("source")).alias("digest"))


def _category() -> Column:
    ev, av = F.col("expected_version"), F.col("index_version")
    has_doc, in_index = F.col("expected_digest").isNotNull(), F.col("in_index").isNotNull()
    return (
        F.when(has_doc & ~in_index, "missing")
        .when(~has_doc & in_index, "orphaned")
        .when(~has_doc, F.lit(None))
        .when(av.isNull() | (av < ev), "stale")
        .when(av > ev, "ahead")
        .when(F.col("expected_digest") != F.col("index_digest"), "content")
    )


def classify(expected: DataFrame, actual: DataFrame) -> DataFrame:
    """``(doc_id, key, category, expected_version, index_version, has_doc, in_index)``; category is
    null when the two sides agree."""
    e = expected.select(
        "doc_id",
        "key",
        F.col("version").alias("expected_version"),
        F.col("digest").alias("expected_digest"),
    )
    a = actual.select(
        "doc_id",
        F.col("version").alias("index_version"),
        F.col("digest").alias("index_digest"),
        F.lit(True).alias("in_index"),
    )
    joined = e.join(a, "doc_id", "full_outer")
    has_doc = F.when(F.col("expected_digest").isNotNull(), True).alias("has_doc")
    return joined.select(
        "doc_id",
        "key",
        _category().alias("category"),
        "expected_version",
        "index_version",
        has_doc,
        "in_index",
    )


def check(
    spark: SparkSession,
    *,
    app: str,
    projection: str | None = None,
    alias: str | None = None,
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
    """Compare the store with the index behind ``alias`` (default: the projection's) for one
    projection of the app ``app`` (``MODULE:ATTR``; ``projection`` may be omitted when it has one).

    ``JobError`` before any Spark job for an app, projection or store the check cannot use.
    """
    if (store_url is None) == (store_parquet is None) or (es_url is None) == (index_parquet is None):
        raise ValueError("give exactly one store source and exactly one index source")
    started = time.monotonic()
    p = one(load_app(app), projection)
    target = alias or p.alias
    if store_url is not None:
        run_sync(require_tables(store_url, [p]))
    if progress is not None:
        progress.phase(f"scanning store and index ({p.name} -> {target})")
    if store_url is not None:
        expected = expected_documents(spark, app, p.name, store_url, shards)
    else:
        rows = spark.read.parquet(str(store_parquet))
        expected = expected_from_records(spark, app, p.name, rows, shards)
    if es_url is not None:
        run_sync(_refresh(es_url, tombstones, target))
        docs = read_index(spark, es_url, target, slices, tombstones=tombstones, page_size=page_size)
    else:
        docs = spark.read.parquet(str(index_parquet))
    totals = Observation()
    classified = classify(expected, index_digests(docs)).observe(totals, *_totals())
    divergent = classified.filter(F.col("category").isNotNull()).persist(StorageLevel.MEMORY_AND_DISK)
    divergent.count()
    seen = totals.get
    counts = {c: seen[c] for c in CATEGORIES}
    expected_docs, index_docs = seen["stored"], seen["indexed"]
    samples = _samples(divergent, sample) if any(counts.values()) else {}
    report = CheckReport(
        target,
        counts,
        {c: samples.get(c, []) for c in CATEGORIES},
        expected_docs,
        index_docs,
        time.monotonic() - started,
        projection=p.name,
    )
    return CheckRun(report, divergent, app, p.name, [divergent])


def _totals() -> list[Column]:
    """Counted while the divergent documents are cached: each category, documents the store gives,
    documents the index holds."""
    category = F.col("category")
    counts = [F.count(F.when(category == c, True)).alias(c) for c in CATEGORIES]
    return [*counts, F.count("has_doc").alias("stored"), F.count("in_index").alias("indexed")]


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


def require_source(store_url: str, es_url: str, tombstones: str, alias: str) -> None:
    """``stores.identity.StoreMismatch`` (one line) unless the store at ``store_url`` is the source
    of the index behind ``alias`` (or the index records none). A SQLite store that does not exist
    is left to ``require_tables`` (nothing is created here)."""
    if store_url.startswith("sqlite:") and not sqlite_path(store_url).is_file():
        return

    async def run() -> None:
        store = await open_wide_store(store_url)
        index = open_index(es_url, tombstones)
        try:
            await require_pairing(store, index, alias, store_url)
        finally:
            await index.close()
            await store.close()

    run_sync(run())


def repair_refusal(report: CheckReport, bound: DeleteBound) -> str | None:
    """Why the repair of ``report``'s divergences must not run without ``--force``: it would
    delete (its orphans) more of the index's documents than ``bound`` allows; None when it may."""
    return bound.refusal(report.counts.get("orphaned", 0), report.index_docs, f"index {report.target}")


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
    """Re-project every divergent partition of ``run`` into ``target`` (default: the checked alias).

    Each is projected with ``framework.runtime.projector.project_partition``
    at a delete floor of the version the index holds, so an orphan is really
    removed; a document with no partition in the store is deleted at that
    version. Returns the writes per action (``index``/``delete``/``stale``);
    an ``ahead`` document stays as it is, since the index rejects the lower version.
    """
    started = time.monotonic()
    if progress is not None:
        progress.phase(f"repairing {run.report.divergent} documents")
    items = run.divergent.select("doc_id", "key", F.coalesce("index_version", F.lit(0))).rdd.map(tuple)
    actions = reproject(
        items,
        app=run.app,
        projection=run.projection,
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
