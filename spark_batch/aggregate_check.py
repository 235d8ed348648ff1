"""An aggregate's tables compared with its recomputation from the store (``spark_batch.aggregates``).

The recomputed contributions against the ``<name>_contrib`` rows, entity by entity, and the
recomputed totals against the ``<name>_totals`` rows, group by group. An entity's
contributions are ``missing`` (none stored, some recomputed), ``extra`` (stored, none
recomputed: its rows are gone or give none) or ``wrong`` (stored and recomputed differ in a
group or its measures' text); a group's totals are ``missing``, ``extra`` or ``wrong``
(members differ, or a measure differs by more than a relative ``TOLERANCE``: a sum's
floating-point rounding depends on the order it was added in). A window's ``revisions`` is not
compared: it is not a function of the entities.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.core.aggregate import Group, parse_series
from spark_batch.aggregates import (
    CATEGORIES,
    AggregateReport,
    aggregate_of,
    contributions,
    sizes,
    stored_contributions,
    stored_totals,
    totals,
)

__all__ = ["TOLERANCE", "AggregateRun", "divergent_entities", "divergent_groups", "check"]

#: Relative tolerance of a measure's comparison (sums added in another order round differently).
TOLERANCE = 1e-9


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
    """How many rows of ``df`` fall in each category, and up to ``n`` labels of each."""
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
    agg = aggregate_of(app, name)
    persist = StorageLevel.MEMORY_AND_DISK
    recomputed = contributions(spark, app, name, store_url, shards).persist(persist)
    expected_totals = totals(spark, recomputed, agg).persist(persist)
    stored = stored_contributions(spark, app, name, store_url, shards).persist(persist)
    found_totals = stored_totals(spark, app, name, store_url, shards).persist(persist)
    entities = divergent_entities(recomputed, stored).persist(persist)
    groups = divergent_groups(expected_totals, found_totals).persist(persist)
    n_entities, contributing, n, n_groups = sizes(recomputed, expected_totals)
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
