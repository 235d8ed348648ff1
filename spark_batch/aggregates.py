"""An app's aggregates recomputed from the store on Spark, and the tables the stream wrote them to.

Recomputation (``contributions``, ``totals``, ``aggregate``): every entity of an aggregate's
source tables is read a scan shard at a time and turned into its contributions by the
aggregate's own ``build`` (``spark_batch.projection.shard_documents``, as the projection jobs
do), at the entity's version mark; each group's totals are ``reduce`` over its contributions
(partial totals merged by ``reduce`` again: count, sum, min and max are associative), with how
many entities contribute (``members``) and the highest of their versions (``reflects``).

What the stream wrote (``stored_contributions``, ``stored_totals``): the ``<name>_contrib`` and
``<name>_totals`` rows, read the same way. ``spark_batch.aggregate_check`` compares the two,
``spark_batch.aggregate_repair`` writes what differs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.aggregates.contributions import NONE
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.core.aggregate import (
    Aggregate,
    MeasureKind,
    parse_group_id,
    reduce,
    series_id,
)
from framework.core.rows import Row
from spark_batch.apps import JobError, app_of, load_app
from spark_batch.io import iterate_async, pages
from spark_batch.projection import shard_documents
from stores.open import open_wide_store

__all__ = [
    "CATEGORIES",
    "CONTRIB_SCHEMA",
    "TOTALS_SCHEMA",
    "AggregateReport",
    "select_aggregates",
    "aggregate_of",
    "sizes",
    "require_aggregate_tables",
    "contributions",
    "totals",
    "stored_contributions",
    "stored_totals",
    "aggregate",
]

CATEGORIES = ("missing", "extra", "wrong")
#: One contribution of an entity: ``key`` its partition key's JSON (None for a stored row),
#: ``version`` the entity's mark (or the stored row's write time); an entity without
#: contributions is one row with null ``series``, ``window`` and ``measures``.
CONTRIB_SCHEMA = StructType(
    [
        StructField("entity", StringType(), False),
        StructField("key", StringType(), True),
        StructField("version", LongType(), False),
        StructField("series", StringType(), True),
        StructField("window", LongType(), True),
        StructField("measures", StringType(), True),
    ]
)
_CONTRIB_ARROW = pa.schema(
    [
        pa.field("entity", pa.string(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("series", pa.string()),
        pa.field("window", pa.int64()),
        pa.field("measures", pa.string()),
    ]
)
#: A group's totals: ``version`` is ``reflects`` when recomputed, the row's write time when stored.
TOTALS_SCHEMA = StructType(
    [
        StructField("series", StringType(), False),
        StructField("window", LongType(), False),
        StructField("measures", StringType(), False),
        StructField("members", LongType(), False),
        StructField("version", LongType(), False),
    ]
)


def select_aggregates(spec: str, name: str | None = None) -> tuple[Aggregate, ...]:
    """The aggregate ``name`` of the app ``spec``, or all of them; ``JobError`` when there is none."""
    app = load_app(spec)
    if not app.aggregates:
        raise JobError(f"app {app.name!r} declares no aggregate")
    if name is None:
        return app.aggregates
    try:
        return (app.aggregate(name),)
    except KeyError:
        known = ", ".join(a.name for a in app.aggregates)
        raise JobError(f"app {app.name!r} has no aggregate {name!r} (aggregates: {known})") from None


async def require_aggregate_tables(store_url: str, aggregates: Sequence[Aggregate], *, create: bool) -> None:
    """``JobError`` unless the store declares the aggregates' own tables; ``create``: declare them."""
    store = await open_wide_store(store_url)
    try:
        for a in aggregates:
            for schema in tables_of(a).all:
                if create:
                    await store.ensure_table(schema)
                    continue
                try:
                    store.schema(schema.name)
                except Exception:  # noqa: BLE001 - SchemaError: undeclared
                    raise JobError(
                        f"store {store_url} has no table {schema.name!r} (aggregate {a.name}): run the app "
                        "or converge spark aggregate --write first"
                    ) from None
    finally:
        await store.close()


def aggregate_of(spec: str, name: str) -> Aggregate:
    """The aggregate ``name`` of the app ``spec`` (executors, and drivers after ``select_aggregates``)."""
    return app_of(spec).aggregate(name)


# -- recomputation ---------------------------------------------------------------------------


def _rows_of(entity: str, key: str, version: int, doc: Mapping[str, Any] | None) -> list[tuple[Any, ...]]:
    if not doc:
        return [(entity, key, version, None, None, None)]
    out = []
    for gid, measures in doc.items():
        g = parse_group_id(gid)
        out.append((entity, key, version, series_id(g.series), g.window, encode_measures(measures)))
    return out


async def _recomputed_pages(
    spec: str, name: str, store_url: str, shard: int, shards: int
) -> AsyncIterator[list[tuple[Any, ...]]]:
    agg = aggregate_of(spec, name)
    store = await open_wide_store(store_url)
    try:
        async for page in pages(shard_documents(store, agg, shard, shards)):
            yield [row for pk, (entity, doc, version) in page for row in _rows_of(entity, pk, version, doc)]
    finally:
        await store.close()


def _arrow(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in _CONTRIB_ARROW]
    arrays = [pa.array(col, f.type) for col, f in zip(columns, _CONTRIB_ARROW, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=_CONTRIB_ARROW)


def _recompute_task(
    spec: str, name: str, store_url: str, shards: int, part: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor (``mapInArrow`` over shard numbers): the contributions of every entity of those shards."""
    for batch in part:
        for shard in batch.column("id").to_pylist():
            for page in iterate_async(lambda: _recomputed_pages(spec, name, store_url, shard, shards)):  # noqa: B023
                yield _arrow(page)


def contributions(spark: SparkSession, spec: str, name: str, store_url: str, shards: int) -> DataFrame:
    """``CONTRIB_SCHEMA`` rows of every entity of the aggregate ``name``, recomputed from its source
    rows, one task per scan shard."""
    task = functools.partial(_recompute_task, spec, name, store_url, shards)
    return spark.range(0, shards, 1, shards).mapInArrow(task, CONTRIB_SCHEMA)


#: A group's partial totals: measures, members, highest version.
_Partial = tuple[dict[str, float], int, int]


def _part(kinds: Mapping[str, MeasureKind], text: str, version: int) -> _Partial:
    return reduce(kinds, [decode_measures(text)]), 1, version


def _merge(kinds: Mapping[str, MeasureKind], a: _Partial, b: _Partial) -> _Partial:
    return reduce(kinds, [a[0], b[0]]), a[1] + b[1], max(a[2], b[2])


def totals(spark: SparkSession, contrib: DataFrame, aggregate: Aggregate) -> DataFrame:
    """``TOTALS_SCHEMA`` rows of every group of ``contrib`` (``version``: the highest contribution's)."""
    kinds = dict(aggregate.measures)
    pairs = (
        contrib.filter(F.col("series").isNotNull())
        .select("series", "window", "measures", "version")
        .rdd.map(lambda r: ((r[0], r[1]), _part(kinds, r[2], r[3])))
    )
    reduced = pairs.reduceByKey(functools.partial(_merge, kinds))
    rows = reduced.map(lambda kv: (kv[0][0], kv[0][1], encode_measures(kv[1][0]), kv[1][1], kv[1][2]))
    return spark.createDataFrame(rows, TOTALS_SCHEMA)


# -- what the stream wrote ---------------------------------------------------------------------


def _contrib_row(r: Row) -> tuple[Any, ...] | None:
    c = r.cells.get("measures")
    if c is None or c.value == NONE:  # NONE: a group the entity left
        return None
    return (
        str(r.key["entity"]),
        None,
        c.writetime,
        str(r.key["series"]),
        int(str(r.key["window"])),
        str(c.value),
    )


def _totals_row(r: Row) -> tuple[Any, ...] | None:
    c, members = r.cells.get("measures"), r.cells.get("members")
    if c is None:  # a window emptied after it was final: its ``revisions`` only
        return None
    n = int(str(members.value)) if members is not None else 0
    return str(r.key["series"]), int(str(r.key["window"])), str(c.value), n, c.writetime


async def _stored_pages(
    spec: str, name: str, store_url: str, which: str, shard: int, shards: int
) -> AsyncIterator[list[tuple[Any, ...]]]:
    t = tables_of(aggregate_of(spec, name))
    table, row_of = (t.contrib, _contrib_row) if which == "contrib" else (t.totals, _totals_row)
    store = await open_wide_store(store_url)
    try:
        async for page in pages(store.scan(table.name, shard=shard, shards=shards)):
            yield [out for r in page if (out := row_of(r)) is not None]
    finally:
        await store.close()


def _stored_task(
    spec: str, name: str, store_url: str, which: str, shards: int, part: Iterable[int]
) -> Iterator[tuple[Any, ...]]:
    for shard in part:
        for page in iterate_async(lambda: _stored_pages(spec, name, store_url, which, shard, shards)):  # noqa: B023
            yield from page


def _stored(spark: SparkSession, spec: str, name: str, store_url: str, which: str, shards: int) -> DataFrame:
    task = functools.partial(_stored_task, spec, name, store_url, which, shards)
    rdd = spark.sparkContext.parallelize(range(shards), shards).mapPartitions(task)
    return spark.createDataFrame(rdd, CONTRIB_SCHEMA if which == "contrib" else TOTALS_SCHEMA)


def stored_contributions(spark: SparkSession, spec: str, name: str, store_url: str, shards: int) -> DataFrame:
    """``CONTRIB_SCHEMA`` rows of the aggregate's ``_contrib`` table (``key`` null, ``version`` the
    row's write time)."""
    return _stored(spark, spec, name, store_url, "contrib", shards)


def stored_totals(spark: SparkSession, spec: str, name: str, store_url: str, shards: int) -> DataFrame:
    """``TOTALS_SCHEMA`` rows of the aggregate's ``_totals`` table (``version`` the row's write time)."""
    return _stored(spark, spec, name, store_url, "totals", shards)


# -- the report --------------------------------------------------------------------------------


@dataclass
class AggregateReport:
    """One aggregate recomputed (and, when checked, compared): sizes, divergence, repair."""

    aggregate: str
    entities: int
    contributing: int
    contributions: int
    groups: int
    seconds: float
    checked: bool = False
    stored_contributions: int = 0
    stored_groups: int = 0
    entity_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    group_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    samples: dict[str, list[str]] = field(default_factory=dict)
    repair: dict[str, int] | None = None
    repaired_seconds: float | None = None

    @property
    def clean(self) -> bool:
        """Nothing differs (always True when only recomputed)."""
        return not any(self.entity_counts.values()) and not any(self.group_counts.values())

    @property
    def rate(self) -> float:
        """Entities recomputed per second."""
        return self.entities / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "aggregate": self.aggregate,
            "entities": self.entities,
            "contributing": self.contributing,
            "contributions": self.contributions,
            "groups": self.groups,
            "seconds": round(self.seconds, 3),
        }
        if self.checked:
            out.update(
                clean=self.clean,
                stored_contributions=self.stored_contributions,
                stored_groups=self.stored_groups,
                entities_divergent=self.entity_counts,
                groups_divergent=self.group_counts,
                samples=self.samples,
            )
        if self.repair is not None:
            out["repair"] = {"writes": self.repair, "seconds": round(self.repaired_seconds or 0.0, 3)}
        return out


def sizes(contrib: DataFrame, groups: DataFrame) -> tuple[int, int, int, int]:
    """Entities, entities with a contribution, contributions, groups."""
    row = contrib.agg(
        F.countDistinct("entity").alias("entities"),
        F.countDistinct(F.when(F.col("series").isNotNull(), F.col("entity"))).alias("contributing"),
        F.count("series").alias("contributions"),
    ).first()
    assert row is not None
    return int(row["entities"]), int(row["contributing"]), int(row["contributions"]), groups.count()


def aggregate(
    spark: SparkSession, *, app: str, name: str, store_url: str, shards: int = 4
) -> AggregateReport:
    """Recompute the aggregate ``name`` of the app ``app`` (``MODULE:ATTR``) from the store and count
    what it gives; writes nothing."""
    started = time.monotonic()
    agg = aggregate_of(app, name)
    contrib = contributions(spark, app, name, store_url, shards).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        entities, contributing, n, groups = sizes(contrib, totals(spark, contrib, agg))
    finally:
        contrib.unpersist()
    return AggregateReport(name, entities, contributing, n, groups, time.monotonic() - started)
