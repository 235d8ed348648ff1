"""An app's aggregates recomputed from the store on Spark, compared with what the stream wrote, repaired.

Recomputation (``contributions``, ``totals``): every entity of an aggregate's source
tables is read a scan shard at a time and turned into its contributions by the
aggregate's own ``build`` (``spark_batch.projection.shard_documents``, as the projection
jobs do), at the entity's version mark; each group's totals are ``reduce`` over its
contributions (partial totals merged by ``reduce`` again: count, sum, min and max are
associative), with how many entities contribute (``members``) and the highest of their
versions (``reflects``).

Comparison (``check``): the recomputed contributions against the ``<name>_contrib`` rows,
entity by entity, and the recomputed totals against the ``<name>_totals`` rows, group by
group. An entity's contributions are ``missing`` (none stored, some recomputed), ``extra``
(stored, none recomputed: its rows are gone or give none) or ``wrong`` (stored and
recomputed differ in a group or its measures' text); a group's totals are ``missing``,
``extra`` or ``wrong`` (members differ, or a measure differs by more than a relative 1e-9:
a sum's floating-point rounding depends on the order it was added in).

Repair (``repair``): the divergent entities' recomputed documents go through
``ContributionIndex.bulk``, the stream projector's own writer, at the entity's version mark
(an entity no source row or mark is left of: emptied at the highest version of its stored
rows); then ``framework.aggregates.totals.recompute`` rewrites the totals of the divergent
groups and of those the contribution writes changed, at ``totals_version``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.aggregates.contributions import NONE, ContributionIndex
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.aggregates.totals import recompute
from framework.core.aggregate import (
    Aggregate,
    Group,
    MeasureKind,
    parse_group_id,
    parse_series,
    reduce,
    series_id,
)
from framework.core.rows import Row
from framework.core.sync import run_sync
from framework.jobs.kafka_ranges import RangeError, partition_bounds
from framework.runtime.change_feed import change_partition
from spark_batch.apps import JobError, app_of, load_app
from spark_batch.io import WriteOptions, iterate_async, pages, with_retries
from spark_batch.projection import shard_documents
from stores.base import IndexOp
from stores.open import open_wide_store

__all__ = [
    "CATEGORIES",
    "CONTRIB_SCHEMA",
    "TOTALS_SCHEMA",
    "AggregateReport",
    "AggregateRun",
    "select_aggregates",
    "require_aggregate_tables",
    "contributions",
    "totals",
    "stored_contributions",
    "stored_totals",
    "divergent_entities",
    "divergent_groups",
    "aggregate",
    "check",
    "repair",
    "group_ends",
    "totals_version",
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
#: Relative tolerance of a measure's comparison (sums added in another order round differently).
TOLERANCE = 1e-9


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


def _aggregate_of(spec: str, name: str) -> Aggregate:
    """The aggregate ``name`` of the app ``spec`` (executor side)."""
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
    agg = _aggregate_of(spec, name)
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
    if c is None:
        return None
    n = int(str(members.value)) if members is not None else 0
    return str(r.key["series"]), int(str(r.key["window"])), str(c.value), n, c.writetime


async def _stored_pages(
    spec: str, name: str, store_url: str, which: str, shard: int, shards: int
) -> AsyncIterator[list[tuple[Any, ...]]]:
    t = tables_of(_aggregate_of(spec, name))
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


@dataclass
class AggregateRun:
    """A finished check of one aggregate: its report, the divergent entities
    ``(entity, key, version, floor, category)`` and groups ``(series, window, category)``, and
    the recomputed contributions a repair writes (cached until ``release``)."""

    report: AggregateReport
    app: str
    entities: DataFrame
    groups: DataFrame
    recomputed: DataFrame
    _cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def _sizes(contrib: DataFrame, groups: DataFrame) -> tuple[int, int, int, int]:
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
    agg = _aggregate_of(app, name)
    contrib = contributions(spark, app, name, store_url, shards).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        entities, contributing, n, groups = _sizes(contrib, totals(spark, contrib, agg))
    finally:
        contrib.unpersist()
    return AggregateReport(name, entities, contributing, n, groups, time.monotonic() - started)


# -- comparison --------------------------------------------------------------------------------


def _category(expected: Column, found: Column) -> Column:
    return F.when(found == 0, "missing").when(expected == 0, "extra").otherwise("wrong")


def divergent_entities(recomputed: DataFrame, stored: DataFrame) -> DataFrame:
    """``(entity, key, version, floor, category)`` of every entity whose stored contributions differ
    from the recomputed ones; ``key`` null for an entity the sources hold nothing of, ``floor``
    the highest write time of its stored rows."""
    on = ["entity", "series", "window"]
    e = recomputed.filter(F.col("series").isNotNull()).select(*on, F.col("measures").alias("e"))
    s = stored.select(*on, F.col("measures").alias("s"), F.col("version").alias("wt"))
    same = F.col("e").isNotNull() & F.col("s").isNotNull() & (F.col("e") == F.col("s"))
    per = (
        e.join(s, on, "full_outer")
        .groupBy("entity")
        .agg(
            F.count("e").alias("expected"),
            F.count("s").alias("found"),
            F.min(same).alias("same"),
            F.max("wt").alias("floor"),
        )
        .filter(~F.col("same"))
    )
    marks = recomputed.select("entity", "key", "version").dropDuplicates(["entity"])
    return per.join(marks, "entity", "left").select(
        "entity", "key", "version", F.coalesce("floor", F.lit(0)).alias("floor"),
        _category(F.col("expected"), F.col("found")).alias("category"),
    )  # fmt: skip


def _measures_differ(expected: Column, found: Column) -> Column:
    """True when two measures' JSON texts differ in a name or by more than ``TOLERANCE``, or one is
    not a JSON object of numbers."""
    kind = "map<string,double>"
    e, s = F.from_json(expected, kind), F.from_json(found, kind)
    off = F.map_filter(
        F.map_zip_with(
            e, s,
            lambda _, a, b: a.isNull() | b.isNull()
            | (F.abs(a - b) > F.lit(TOLERANCE) * F.greatest(F.abs(a), F.abs(b), F.lit(1.0))),
        ),
        lambda _, v: v,
    )  # fmt: skip
    return e.isNull() | s.isNull() | (F.size(off) > 0)


def divergent_groups(recomputed: DataFrame, stored: DataFrame) -> DataFrame:
    """``(series, window, category)`` of every group whose stored totals differ from the recomputed."""
    on = ["series", "window"]
    e = recomputed.select(*on, F.col("measures").alias("e"), F.col("members").alias("em"))
    s = stored.select(*on, F.col("measures").alias("s"), F.col("members").alias("sm"))
    joined = e.join(s, on, "full_outer")
    category = (
        F.when(F.col("s").isNull(), "missing")
        .when(F.col("e").isNull(), "extra")
        .when((F.col("em") != F.col("sm")) | _measures_differ(F.col("e"), F.col("s")), "wrong")
    )
    return joined.select(*on, category.alias("category")).filter(F.col("category").isNotNull())


def _counts(
    df: DataFrame, n: int, label: Callable[[Any], str]
) -> tuple[dict[str, int], dict[str, list[str]]]:
    counts = dict.fromkeys(CATEGORIES, 0)
    samples: dict[str, list[str]] = {}
    for r in df.groupBy("category").count().collect():
        counts[r["category"]] = int(r["count"])
    for c in CATEGORIES:
        if counts[c] and n > 0:
            samples[c] = sorted(label(r) for r in df.filter(F.col("category") == c).limit(n).collect())
    return counts, samples


def check(
    spark: SparkSession, *, app: str, name: str, store_url: str, shards: int = 4, sample: int = 10
) -> AggregateRun:
    """Recompute the aggregate ``name`` and compare it with its ``_contrib`` and ``_totals`` tables."""
    started = time.monotonic()
    agg = _aggregate_of(app, name)
    persist = StorageLevel.MEMORY_AND_DISK
    recomputed = contributions(spark, app, name, store_url, shards).persist(persist)
    expected_totals = totals(spark, recomputed, agg).persist(persist)
    stored = stored_contributions(spark, app, name, store_url, shards).persist(persist)
    found_totals = stored_totals(spark, app, name, store_url, shards).persist(persist)
    entities = divergent_entities(recomputed, stored).persist(persist)
    groups = divergent_groups(expected_totals, found_totals).persist(persist)
    n_entities, contributing, n, n_groups = _sizes(recomputed, expected_totals)
    entity_counts, entity_samples = _counts(entities, sample, lambda r: r["entity"])
    group_counts, group_samples = _counts(
        groups, sample, lambda r: Group(tuple(parse_series(r["series"])), r["window"]).id
    )
    report = AggregateReport(
        name, n_entities, contributing, n, n_groups, time.monotonic() - started, checked=True,
        stored_contributions=stored.count(), stored_groups=found_totals.count(),
        entity_counts=entity_counts, group_counts=group_counts,
        samples={**{f"entities {c}": s for c, s in entity_samples.items()},
                 **{f"groups {c}": s for c, s in group_samples.items()}},
    )  # fmt: skip
    for df in (stored, found_totals, expected_totals):
        df.unpersist()
    return AggregateRun(report, app, entities, groups, recomputed, [recomputed, entities, groups])


# -- repair ------------------------------------------------------------------------------------


async def group_ends(broker: str, topic: str) -> dict[int, int]:
    """The end offset of every partition of the group topic ``topic``; ``JobError`` when the broker
    has no such topic or cannot be read."""
    try:
        bounds = await partition_bounds(broker, [topic])
    except RangeError:
        raise JobError(
            f"no group topic {topic!r} on {broker}: start the app's worker once (it creates it)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any client failure: one line
        raise JobError(
            f"broker {broker}: cannot read the ends of {topic!r}: {type(exc).__name__}: {exc}"
        ) from None
    return {p: end for (_, p), (_, end) in bounds.items()}


def totals_version(ends: Mapping[int, int], g: Group) -> int:
    """The version a repair writes the totals of ``g`` at: the end offset of its group topic
    partition (read before the repair reads any group's contributions) plus one.

    The stream writes a group's totals at the offset of the record announcing it plus one
    (``framework.aggregates.totals``). Every record below the end was announced, so its
    contributions written, before the repair reads them: the repair's totals include its change,
    and the stream's write for it is at or below the end, below the repair's. The records
    announced later write from the end plus one up, computed after their change: all but the
    first above the repair. So the end is one version clock for the totals present, the deleted ones and the
    records not yet processed.

    Not the highest write time of the totals rows plus one: a deleted row's tombstone is not
    read back, so a row deleted above that maximum would stay deleted; and a maximum over the
    table mixes partitions whose offsets are unrelated, so a group of a partition far behind
    would be written above everything its stream writes for a long time, freezing its totals.
    Not the end itself: the partition's last record may have written this group at exactly the
    end, and a tie is won by the larger value, not the newer. The one record a repair can tie
    with is the first announced after the end was read; if its change came after the repair's
    read, the group's next change or a second check sets it right.
    """
    return ends[change_partition(g.id, len(ends))] + 1


def _documents(rows: Iterable[Any]) -> Iterator[IndexOp]:
    """``(entity, version, series, window, measures)`` rows sorted by entity, as one ``IndexOp`` per
    entity (its recomputed document, None when it has none)."""
    entity: str | None = None
    version = 0
    doc: dict[str, dict[str, float]] = {}
    for r in rows:
        if r[0] != entity:
            if entity is not None:
                yield IndexOp(entity, version, doc or None)
            entity, version, doc = r[0], int(r[1]), {}
        if r[2] is not None:
            doc[Group(tuple(parse_series(r[2])), int(r[3])).id] = decode_measures(r[4])
    if entity is not None:
        yield IndexOp(entity, version, doc or None)


def _contrib_repair_task(
    spec: str, name: str, store_url: str, opts: WriteOptions, part: Iterable[Any]
) -> Iterator[tuple[str, Any]]:
    """Executor: write each entity's recomputed contributions through ``ContributionIndex.bulk``;
    yields ``("written", entities)`` and ``("changed", group id)`` of each group the writes changed."""
    agg = _aggregate_of(spec, name)
    ops = list(_documents(part))
    if not ops:
        return
    changed: list[str] = []

    async def announce(_: Aggregate, groups: Sequence[Group]) -> None:
        changed.extend(g.id for g in groups)

    async def run() -> None:
        store = await open_wide_store(store_url)
        try:
            index = ContributionIndex(store, [agg], announce)
            for i in range(0, len(ops), opts.batch_size):
                chunk = ops[i : i + opts.batch_size]
                await with_retries(functools.partial(index.bulk, agg.name, chunk), opts)
        finally:
            await store.close()

    run_sync(run())
    yield ("written", len(ops))
    yield from (("changed", gid) for gid in dict.fromkeys(changed))


def _totals_repair_task(
    spec: str, name: str, store_url: str, ends: Mapping[int, int], opts: WriteOptions, part: Iterable[str]
) -> Iterator[tuple[str, int]]:
    """Executor: ``recompute`` the totals of each group id at ``totals_version``; yields counts."""
    agg = _aggregate_of(spec, name)
    groups = [parse_group_id(gid) for gid in part]
    if not groups:
        return

    async def run() -> int:
        store = await open_wide_store(store_url)
        try:
            live = 0
            for i in range(0, len(groups), opts.batch_size):
                chunk = {g: totals_version(ends, g) for g in groups[i : i + opts.batch_size]}
                live += await with_retries(functools.partial(recompute, store, agg, chunk), opts)
            return live
        finally:
            await store.close()

    live = run_sync(run())
    yield ("totals", live)
    yield ("totals_deleted", len(groups) - live)


def repair(
    spark: SparkSession,
    run: AggregateRun,
    *,
    store_url: str,
    ends: Mapping[int, int],
    partitions: int = 4,
    opts: WriteOptions | None = None,
) -> dict[str, int]:
    """Write the recomputed contributions of every divergent entity of ``run`` at its mark, then
    the totals of the divergent groups and of the groups those writes changed, at
    ``totals_version(ends, group)`` (``ends``: the group topic's end offset per partition,
    ``group_ends``, read before the repair starts). Returns the writes per kind.

    ``ContributionIndex.bulk`` skips an entity whose stored contributions record a higher mark
    than the one recomputed (only a write behind the pipeline's back puts one there): those stay,
    and the next check reports them again."""
    if not ends:
        raise JobError(f"aggregate {run.report.aggregate}: the group topic has no partition")
    started = time.monotonic()
    name, opts = run.report.aggregate, opts or WriteOptions()
    divergent = run.groups.select("series", "window").collect()  # before any write
    todo = run.entities.select("entity", F.when(F.col("key").isNull(), F.col("floor"))
                               .otherwise(F.col("version")).alias("at"))  # fmt: skip
    docs = todo.join(run.recomputed.select("entity", "series", "window", "measures"), "entity", "left")
    ordered = docs.select("entity", "at", "series", "window", "measures").repartition(partitions, "entity")
    task = functools.partial(_contrib_repair_task, run.app, name, store_url, opts)
    out = ordered.sortWithinPartitions("entity").rdd.map(tuple).mapPartitions(task).collect()
    written = sum(n for kind, n in out if kind == "written")
    changed = {gid for kind, gid in out if kind == "changed"}
    gids = sorted(changed | {Group(tuple(parse_series(r["series"])), int(r["window"])).id for r in divergent})
    counts = {"contributions": written, "totals": 0, "totals_deleted": 0}
    if gids:
        task2 = functools.partial(_totals_repair_task, run.app, name, store_url, dict(ends), opts)
        for kind, n in spark.sparkContext.parallelize(gids, partitions).mapPartitions(task2).collect():
            counts[kind] += n
    run.report.repair = counts
    run.report.repaired_seconds = time.monotonic() - started
    return counts
