"""Incremental reads on Spark: the current rows of what changed since a consumer's checkpoint.

The driver reads the consumer's notification entries after its checkpoint
(``framework.notifications.NotificationReader``, paged, up to the settle
horizon) and gathers, per table, the changed keys and the tenants whose
entries said "re-read". Executors then read the current rows: the listed
keys in slices (``read_rows``, one hop per slice), and the whole table
filtered to the re-read tenants (a sharded scan). Each table becomes a
DataFrame of its own columns plus:

- ``_deleted``: the key was listed but has no live row now (delete it);
- ``_reread``: the row comes from a re-read of its tenant (replace that
  tenant's rows of the table with these; deleted rows of it are absent);
- ``_version``: the row's highest cell write time.

``export_changes`` writes each table to ``OUT/<table>`` as Parquet and then
commits the checkpoint, so a failed export is read again next time.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from framework.coordination import Checkpoint
from framework.core.rows import Row
from framework.core.schema import TableSchema
from framework.notifications import DEFAULT_RETENTION, Entry, NotificationReader, Position, TenantOf
from framework.notifications.entries import default_tenant_of, key_ident
from framework.notifications.reader import DEFAULT_SETTLE
from spark_batch.io import iterate_async
from stores.open import open_wide_store

__all__ = ["ChangeSet", "ChangesExport", "collect_changes", "changed_rows", "export_changes", "spark_type"]

_TYPES: dict[str, DataType] = {
    "text": StringType(),
    "bigint": LongType(),
    "int": IntegerType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "blob": BinaryType(),
}
#: Keys per executor read (one ``read_rows`` call).
_SLICE = 1000


def spark_type(column_type: str) -> DataType:
    """The Spark type of a store column type."""
    return _TYPES[column_type]


@dataclass
class ChangeSet:
    """What a consumer's entries since its checkpoint name: per table the changed keys and the
    re-read tenants, the number of entries and the last entry's position (None: no entry)."""

    keys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reread: dict[str, set[str]] = field(default_factory=dict)
    entries: int = 0
    last: Position | None = None
    #: the consumer's checkpoint when the entries were read (what a commit expects)
    checkpoint: Checkpoint | None = None

    def add(self, entries: Iterable[Entry]) -> None:
        seen = {t: {key_ident(k) for k in keys} for t, keys in self.keys.items()}
        for e in entries:
            self.entries += 1
            self.last = e.position if self.last is None else max(self.last, e.position)
            if e.reread or e.keys is None:
                self.reread.setdefault(e.table, set()).add(e.tenant)
                continue
            known = seen.setdefault(e.table, set())
            for k in e.keys:
                if (ident := key_ident(k)) not in known:
                    known.add(ident)
                    self.keys.setdefault(e.table, []).append(k)

    @property
    def tables(self) -> list[str]:
        return sorted(set(self.keys) | set(self.reread))


async def _collect(reader: NotificationReader, page: int, tables: Collection[str] | None) -> ChangeSet:
    changes, after = ChangeSet(), None
    while batch := await reader.read(page, after=after):
        after = batch[-1].position
        changes.add(e for e in batch if tables is None or e.table in tables)
        changes.last = after
    changes.checkpoint = reader.seen
    return changes


def collect_changes(
    store_url: str,
    checkpoints_url: str,
    consumer: str,
    *,
    tables: Collection[str] | None = None,
    retention: int = DEFAULT_RETENTION,
    settle: float = DEFAULT_SETTLE,
    start: Literal["earliest", "latest"] = "earliest",
    page: int = 10_000,
) -> ChangeSet:
    """Driver: every entry after the consumer's checkpoint (of ``tables`` only, when given),
    gathered per table; NotificationGap when the checkpoint is older than the retention. The
    position advances past entries of other tables too."""

    async def run() -> ChangeSet:
        from framework.coordination import open_checkpoint_store

        store = await open_wide_store(store_url)
        checkpoints = await asyncio.to_thread(open_checkpoint_store, checkpoints_url)
        try:
            reader = NotificationReader(store, checkpoints, consumer, retention=retention, settle=settle,
                                        start=start)  # fmt: skip
            await reader.ensure()
            return await _collect(reader, page, tables)
        finally:
            await checkpoints.close()
            await store.close()

    return asyncio.run(run())


def _output_schema(schema: TableSchema) -> StructType:
    fields = [StructField(c.name, spark_type(c.type), True) for c in schema.all_columns]
    fields += [StructField("_deleted", BooleanType(), False), StructField("_reread", BooleanType(), False),
               StructField("_version", LongType(), True)]  # fmt: skip
    return StructType(fields)


def _record(schema: TableSchema, key: dict[str, Any], row: Row | None, reread: bool) -> tuple[Any, ...]:
    if row is None:
        return (
            *(key.get(c.name) for c in schema.key_columns),
            *(None for _ in schema.columns),
            True,
            reread,
            None,
        )
    values = row.values()
    return (*(row.key[c.name] for c in schema.key_columns), *(values.get(c.name) for c in schema.columns),
            False, reread, row.version)  # fmt: skip


def _keys_task(store_url: str, schema: TableSchema, part: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    """Executor: the current rows of a slice of listed keys (JSON texts)."""
    keys = [json.loads(k) for k in part]

    async def rows() -> Any:
        store = await open_wide_store(store_url)
        try:
            for i in range(0, len(keys), _SLICE):
                chunk = keys[i : i + _SLICE]
                yield list(zip(chunk, await store.read_rows(schema.name, chunk), strict=True))
        finally:
            await store.close()

    for page in iterate_async(rows):
        for key, row in page:
            yield _record(schema, key, row, False)


def _reread_task(
    store_url: str, schema: TableSchema, tenants: frozenset[str], tenant_of: TenantOf, shards: int,
    part: Iterable[int],
) -> Iterator[tuple[Any, ...]]:  # fmt: skip
    """Executor: the live rows of the re-read tenants in some shards of the table."""
    for shard in part:

        async def rows(shard: int = shard) -> Any:
            store = await open_wide_store(store_url)
            try:
                async for row in store.scan(schema.name, shard=shard, shards=shards):
                    if (tenant_of(schema.name, row.key) or "-") in tenants:
                        yield row
            finally:
                await store.close()

        for row in iterate_async(rows):
            yield _record(schema, dict(row.key), row, True)


def changed_rows(
    spark: SparkSession,
    store_url: str,
    changes: ChangeSet,
    schemas: dict[str, TableSchema],
    *,
    tenant_of: TenantOf | None = None,
    partitions: int | None = None,
) -> dict[str, DataFrame]:
    """Per changed table (its schema in ``schemas``), a DataFrame of its current changed rows
    (module docstring); ``tenant_of`` as the writers' (default ``default_tenant_of``)."""
    tenant_of = tenant_of or default_tenant_of
    n = max(1, partitions or spark.sparkContext.defaultParallelism)
    out: dict[str, DataFrame] = {}
    for table in changes.tables:
        schema = schemas[table]
        tenants = frozenset(changes.reread.get(table, ()))
        keys = [
            json.dumps(k) for k in changes.keys.get(table, ()) if (tenant_of(table, k) or "-") not in tenants
        ]
        slices = max(1, min(n, len(keys) // _SLICE + 1))
        keyed = functools.partial(_keys_task, store_url, schema)
        rdd = spark.sparkContext.parallelize(keys, slices).mapPartitions(keyed)
        if tenants:
            task = functools.partial(_reread_task, store_url, schema, tenants, tenant_of, n)
            rdd = rdd.union(spark.sparkContext.parallelize(range(n), n).mapPartitions(task))
        out[table] = spark.createDataFrame(rdd, _output_schema(schema))
    return out


@dataclass
class ChangesExport:
    """What ``export_changes`` did: entries read, rows written per table, the tables re-read per
    tenant, and the committed position (None when nothing was read or not committed)."""

    consumer: str
    entries: int
    rows: dict[str, int]
    reread: dict[str, list[str]]
    committed: Position | None

    def to_dict(self) -> dict[str, Any]:
        return {"consumer": self.consumer, "entries": self.entries, "rows": self.rows, "reread": self.reread,
                "committed": None if self.committed is None else list(self.committed)}  # fmt: skip


def export_changes(
    spark: SparkSession,
    store_url: str,
    checkpoints_url: str,
    consumer: str,
    out: str | Path,
    schemas: dict[str, TableSchema],
    *,
    tenant_of: TenantOf | None = None,
    commit: bool = True,
    partitions: int | None = None,
    **read: Any,
) -> ChangesExport:
    """Write the current changed rows since the consumer's checkpoint to ``out/<table>`` (Parquet,
    replacing it), then commit the checkpoint past the entries read. ``read``: options of
    ``collect_changes`` (``tables``, ``retention``, ``settle``, ``start``, ``page``)."""
    tables = read.pop("tables", None) or list(schemas)
    changes = collect_changes(store_url, checkpoints_url, consumer, tables=tables, **read)
    rows: dict[str, int] = {}
    for table, df in changed_rows(spark, store_url, changes, schemas, tenant_of=tenant_of,
                                  partitions=partitions).items():  # fmt: skip
        df.write.mode("overwrite").parquet(str(Path(out) / table))
        rows[table] = spark.read.parquet(str(Path(out) / table)).count()
    committed = None
    if commit and changes.last is not None:
        committed = _commit(store_url, checkpoints_url, consumer, changes)
    reread = {t: sorted(v) for t, v in changes.reread.items()}
    return ChangesExport(consumer, changes.entries, rows, reread, committed)


def _commit(store_url: str, checkpoints_url: str, consumer: str, changes: ChangeSet) -> Position:
    last = changes.last
    assert last is not None

    async def run() -> Position:
        from framework.coordination import open_checkpoint_store

        store = await open_wide_store(store_url)
        checkpoints = await asyncio.to_thread(open_checkpoint_store, checkpoints_url)
        try:
            reader = NotificationReader(store, checkpoints, consumer)
            return await reader.commit_position(last, changes.checkpoint)
        finally:
            await checkpoints.close()
            await store.close()

    return asyncio.run(run())
