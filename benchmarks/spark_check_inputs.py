"""The input of ``benchmarks.spark_check``: synthetic hub rows of the reference platform, their
projections with a known 0.4 % of divergence, and the counts a check must report.

Hub rows (a record, insights on every third, 0-2 engagement log rows each) and their
documents, damaged per 1,000 rows as ``DAMAGE`` says (missing, stale, content, orphans):

- ``write_parquet_inputs``: rows and documents as Parquet, written by Spark (the
  ``read_store_rows`` / ``read_index`` export format);
- ``populate_live``: the rows in a SQLite store (``fill_store``) and the documents in an
  Elasticsearch index, built by the reindex build job (on Spark, or by a given ``build``).

``expected_counts(n)`` is what a check of ``n`` rows reports. ``benchmarks.spark_check`` and
``benchmarks.spark_check_command`` both measure checks of this input.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from examples.activity_platform.app import app as reference_app
from framework.core.cells import Cell
from framework.core.mutations import CellValue, LogState, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import TableSchema
from spark_batch.codec import canonical_json, row_to_record
from spark_batch.io import DOC_SCHEMA, ROW_SCHEMA, WriteOptions, open_index
from spark_batch.reindex import build_task
from stores.base import IndexOp
from stores.sqlite.engine import SqliteEngine

#: The app the check runs (the reference platform) and its projection.
APP = "examples.activity_platform.app:app"
PROJECTION = reference_app.projection("activities")
ACTIVITY_HUB, ENGAGEMENT_LOG = PROJECTION.tables
VERSIONS = PROJECTION.version_table

BASE = 1_700_000_000_000_000
STATES = ("sent", "opened", "clicked")
#: Per 1,000 hub rows: which are damaged in the index, and how.
DAMAGE = {7: "missing", 13: "stale", 17: "content", 23: "orphaned"}


def synth(i: int) -> list[Mutation]:
    """The mutations of hub row ``i`` (deterministic), version mark included."""
    hub, v = f"hub-{i:09d}", BASE + i * 10
    ident = {"org_id": f"org-{i % 97}", "source": "bench", "external_id": f"x{i}"}
    record: dict[str, CellValue] = {
        **ident,
        "kind": "email",
        "subject": f"Quarterly review {i}",
        "status": "sent",
        "body_preview": "Thanks for the call today, here are the notes " * 2,
        "starts_at": v,
        "participants": f"a{i % 13}@example.com,b{i % 7}@example.com",
    }
    out: list[Mutation] = [Upsert(ACTIVITY_HUB.name, {"hub_id": hub}, record, v)]
    if i % 3 == 0:
        insight: dict[str, CellValue] = {
            **ident,
            "sentiment": "positive",
            "topic": "pricing",
            "score": (i % 100) / 100,
        }
        out.append(Upsert(ACTIVITY_HUB.name, {"hub_id": hub}, insight, v + 5))
    for j in range(i % 3):
        out.append(
            LogState(
                ENGAGEMENT_LOG.name,
                {"hub_id": hub},
                STATES[j],
                at=v + j,
                event_id=f"e{i}-{j}",
                version=v + j + 1,
                attrs={"actor": f"a{i % 13}@example.com"},
            )
        )
    return out + PROJECTION.version_marks(out)


def synth_rows(i: int) -> tuple[Row, list[Row], Row]:
    """The hub row, log rows and version mark a store holds after applying ``synth(i)``."""
    cells: dict[str, Cell] = {}
    log: list[Row] = []
    mark: Row | None = None
    for m in synth(i):
        if isinstance(m, LogState):
            u = m.as_upsert()
            log.append(Row(dict(u.key), {n: Cell(val, u.version) for n, val in u.cells.items()}))
        elif isinstance(m, Upsert) and m.table == VERSIONS.name:
            mark = Row(dict(m.key), {n: Cell(val, m.version) for n, val in m.cells.items()})
        elif isinstance(m, Upsert):
            cells.update({n: Cell(val, m.version) for n, val in m.cells.items()})
    assert mark is not None
    return Row({"hub_id": f"hub-{i:09d}"}, cells), log, mark


def damaged_docs(i: int) -> list[tuple[str, int, str]]:
    """Index documents of hub row ``i`` as the benchmark's index holds them (with damage)."""
    hub, log, mark = synth_rows(i)
    rows = {ACTIVITY_HUB.name: [hub], ENGAGEMENT_LOG.name: log}
    doc_id, doc, version = PROJECTION.document(dict(hub.key), rows, mark)
    assert doc is not None
    kind = DAMAGE.get(i % 1000)
    if kind == "missing":
        return []
    if kind == "stale":
        version -= 1
    if kind == "content":
        doc = {**doc, "subject": "tampered"}
    out = [(doc_id, version, canonical_json(doc))]
    if kind == "orphaned":
        out.append((f"orphan-{i}", version, canonical_json({"hub_id": f"orphan-{i}", "has_record": False})))
    return out


def _row_records(part: Iterable[Any]) -> Iterator[tuple[str, str, str, str]]:
    for r in part:
        hub, log, mark = synth_rows(r.id)
        yield row_to_record(ACTIVITY_HUB, hub)
        yield from (row_to_record(ENGAGEMENT_LOG, x) for x in log)
        yield row_to_record(VERSIONS, mark)


def _doc_records(part: Iterable[Any]) -> Iterator[tuple[str, int, str]]:
    for r in part:
        yield from damaged_docs(r.id)


def expected_counts(n: int) -> dict[str, int]:
    per = {k: sum(1 for i in range(n) if i % 1000 == r) for r, k in DAMAGE.items()}
    return {
        "missing": per["missing"],
        "stale": per["stale"],
        "orphaned": per["orphaned"],
        "content": per["content"],
        "ahead": 0,
    }


def write_parquet_inputs(spark: Any, n: int, work: Path, partitions: int) -> tuple[str, str]:
    """The row records and index documents of ``n`` hub rows as Parquet under ``work`` (kept from an
    earlier run when complete there); their paths."""
    ids = spark.range(0, n, numPartitions=partitions)
    rows, docs = str(work / f"rows-{n}"), str(work / f"docs-{n}")
    for path, records, schema in ((rows, _row_records, ROW_SCHEMA), (docs, _doc_records, DOC_SCHEMA)):
        if not (Path(path) / "_SUCCESS").exists():
            frame = spark.createDataFrame(ids.rdd.mapPartitions(records), schema)
            frame.write.mode("overwrite").parquet(path)
    return rows, docs


def fill_store(
    path: Path, tables: Sequence[TableSchema], synth: Callable[[int], list[Mutation]], n: int
) -> None:
    """A SQLite store at ``path`` with ``tables`` and the mutations ``synth(i)`` for ``i < n``,
    applied 20,000 at a time."""
    engine = SqliteEngine(path)
    for t in tables:
        engine.ensure_table(t)
    batch: list[Mutation] = []
    for i in range(n):
        batch += synth(i)
        if len(batch) >= 20_000:
            engine.apply(batch)
            batch = []
    engine.apply(batch)
    engine.close()


def populate_live(
    spark: Any,
    n: int,
    work: Path,
    es_url: str,
    alias: str,
    shards: int,
    build: Callable[[str, str, int], None] | None = None,
    damaged: bool = True,
) -> tuple[str, float]:
    """The rows in a SQLite store, the (``damaged``) documents in the index; (store URL, load
    seconds). The documents are built by the reindex build job on ``spark``, or by ``build(store
    URL, index, shards)``."""
    started = time.perf_counter()
    path = work / f"wide-{n}.db"
    fill_store(path, reference_app.tables, synth, n)
    url = f"sqlite:///{path}"

    async def damage() -> str:
        index = open_index(es_url, "document")
        try:
            name = await index.ensure_index(alias, PROJECTION.mappings)
            # in a few bulk requests: noida-db writes its whole index state again on every write
            damaged = [i for i in range(n) if i % 1000 in DAMAGE]
            for start in range(0, len(damaged), 10_000):
                chunk = damaged[start : start + 10_000]
                deletes = [{"delete": {"_index": name, "_id": f"hub-{i:09d}"}} for i in chunk]
                await index.client.bulk(operations=deletes, refresh=False)
                ops = [IndexOp(d_id, version, json.loads(source)) for i in chunk
                       for d_id, version, source in damaged_docs(i)]  # fmt: skip
                result = await index.bulk(alias, ops)
                assert not result.failed, result.failed[:3]
            await index.refresh(alias)
            return name
        finally:
            await index.close()

    target = asyncio.run(_create(es_url, alias))
    if build is not None:
        build(url, target, shards)
    else:
        opts = WriteOptions(batch_size=1000)
        args = (APP, PROJECTION.name, url, es_url, "document", target, shards, opts)
        task = functools.partial(build_task, *args)
        spark.sparkContext.parallelize(range(shards), shards).mapPartitions(task).collect()
    if damaged:
        asyncio.run(damage())
    return url, time.perf_counter() - started


async def _create(es_url: str, alias: str) -> str:
    index = open_index(es_url, "document")
    try:
        return await index.ensure_index(alias, PROJECTION.mappings)
    finally:
        await index.close()
