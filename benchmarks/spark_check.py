"""Spark convergence check throughput at growing sizes (hub rows per second).

Synthetic hub rows (a record, insights on every third, 0-2 engagement log rows
each) and their projections, with a known 0.4 % of divergence (missing,
stale, content, orphans). Two input paths:

- ``live``: the rows applied to a SQLite store and the documents bulk-written
  into noida-db's Elasticsearch endpoint (the reindex build job), then
  ``check`` scans both (shards, slices) and compares;
- ``parquet``: the same rows and documents written as Parquet by Spark (the
  ``read_store_rows`` / ``read_index`` export format) and checked from there,
  for sizes the embedded index cannot hold.

    python -m benchmarks.spark_check --sizes 100000 1000000 --backfill 1000000 --runs 5
    python -m benchmarks.spark_check --sizes --phases 10000 --command 10000 --runs 5

The calibration line comes first (``benchmarks.scale_out.calibrate``: the raw
aiokafka rate on this machine, on a noida-db of its own). Every size (and
backfill) is measured once a round, ``--runs`` rounds, in one session after a
warm-up; the table gives medians with their ranges: wall time, rows/s, the
CPU seconds of the process tree (the embedded stack's own processes too when
it runs) and the CPU microseconds per row of each process class (driver / JVM
/ Python workers, ``benchmarks.proc_cpu``). ``--backfill N`` also measures
``backfill`` of N archived events in the same session
(``benchmarks.spark_backfill``). ``--conf KEY=VALUE`` overrides the session's
conf (e.g. the defaults of another commit; ``--phases`` too).

``--command N`` times ``converge spark check`` of N live rows as a user runs it
(``benchmarks.spark_check_command``: a subprocess, the JVM's start included),
``--tree LABEL=DIR`` the same command of another checkout (say, the base
commit's ``git archive``) interleaved with this one; ``--phases N`` times the
parts of one such check in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.proc_cpu import cpu_by_process, cpu_split, load_average, tree_cpu_seconds
from benchmarks.scale_out import calibrate
from benchmarks.spark_backfill import measure_backfill
from benchmarks.spark_runs import print_table
from examples.activity_platform.app import app as reference_app
from framework.core.cells import Cell
from framework.core.mutations import CellValue, LogState, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import TableSchema
from spark_batch.codec import canonical_json, row_to_record
from spark_batch.convergence import check
from spark_batch.io import DOC_SCHEMA, ROW_SCHEMA, WriteOptions, open_index
from spark_batch.reindex import build_task
from spark_batch.session import spark_session
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


def measure(spark: Any, n: int, mode: str, shards: int, **sources: str) -> dict[str, Any]:
    cpu, processes, started = tree_cpu_seconds(), cpu_by_process(), time.perf_counter()
    run = check(
        spark,
        app=APP,
        alias=f"bench-{n}",
        shards=shards,
        slices=shards,
        tombstones="document",
        **sources,  # type: ignore[arg-type]
    )
    seconds, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu
    split = cpu_split(processes, cpu_by_process())
    run.release()
    assert run.report.counts == expected_counts(n), (run.report.counts, expected_counts(n))
    return {
        "mode": mode,
        "rows": n,
        "documents": run.report.index_docs,
        "seconds": round(seconds, 1),
        "rows_per_s": round(n / seconds),
        "divergent": run.report.divergent,
        "cpu_s": round(cpu, 1),
        "cpu_split": split,
        "load": load_average(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--live-max", type=int, default=100_000, help="largest size also checked live")
    ap.add_argument("--es-url", default=None, help="Elasticsearch URL (default: start noida-db)")
    ap.add_argument("--shards", type=int, default=4, help="store shards and index slices (default 4)")
    ap.add_argument("--master", default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="append results as JSON lines")
    ap.add_argument("--backfill", type=int, nargs="*", default=[], help="also backfill this many events")
    ap.add_argument("--runs", type=int, default=1, help="runs of every size, interleaved (default 1)")
    ap.add_argument("--command", type=int, nargs="*", default=[], help="time `converge spark check`, N rows")
    ap.add_argument("--phases", type=int, default=None, help="time the parts of a check of N live rows")
    ap.add_argument(
        "--tree", action="append", default=[], metavar="LABEL=DIR", help="--command of this tree too"
    )
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="session conf")
    ap.add_argument("--calibration", type=int, default=100_000, help="calibration records (0: none)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="converge-spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.calibration:
        print(calibrate(work / "calibration", args.calibration), flush=True)
    if args.command or args.phases:
        from benchmarks.spark_check_command import main_command

        try:
            main_command(args, work)
        finally:
            if args.workdir is None:
                shutil.rmtree(work, ignore_errors=True)
        return
    conf = dict(c.split("=", 1) for c in args.conf)
    spark = spark_session("converge-bench-check", args.master, conf)
    results: list[dict[str, Any]] = []
    backfilled: list[dict[str, Any]] = []
    stack = None
    try:
        es_url = args.es_url
        if es_url is None and any(n <= args.live_max for n in args.sizes):
            from framework.local_stack import LocalStack

            stack = LocalStack(work / "stack")
            es_url = stack.start().es_url
        rows, docs = write_parquet_inputs(spark, 5_000, work, args.shards)  # warm-up: JVM, Python workers
        measure(spark, 5_000, "warm-up", args.shards, store_parquet=rows, index_parquet=docs)
        inputs: list[tuple[int, str, dict[str, str]]] = []
        for n in args.sizes:
            rows, docs = write_parquet_inputs(spark, n, work, args.shards)
            inputs.append((n, "parquet", {"store_parquet": rows, "index_parquet": docs}))
            if n <= args.live_max and es_url is not None:
                url, load = populate_live(spark, n, work, es_url, f"bench-{n}", args.shards)
                print(json.dumps({"mode": "live-load", "rows": n, "seconds": round(load, 1)}), flush=True)
                inputs.append((n, "live", {"store_url": url, "es_url": es_url}))
        if args.backfill:
            measure_backfill(spark, 5_000, work, args.shards, "warm-up")
        for _ in range(args.runs):  # interleaved: every size and mode once a round
            for n, mode, sources in inputs:
                results.append(measure(spark, n, mode, args.shards, **sources))
                print(json.dumps(results[-1]), flush=True)
            for n in args.backfill:
                backfilled.append(measure_backfill(spark, n, work, args.shards))
                print(json.dumps(backfilled[-1]), flush=True)
    finally:
        if stack is not None:
            stack.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with args.json.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in results + backfilled)
    print_table(results, "rows")
    if backfilled:
        print()
        print_table(backfilled, "events")


if __name__ == "__main__":
    main()
