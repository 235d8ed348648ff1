"""ID mutation throughput: requests/s for collapse + apply, and rows moved/s, side by side.

The mix (``benchmarks.id_mutation_mix``): ``--requests`` requests over ``--tenants`` tenants,
30 % in chains of 2-5, 10 % merges, 5 % deletes, the rest single converts; a SQLite store file
with ``--rows`` rows of one owner table (5 rows of two cells under every old id, untouched
owners for the rest). Each variant runs on its own copy of the file:

- ``components``: the connected components alone, per tenant, by the reference union-find,
  networkx and scipy.sparse.csgraph (when installed), then the whole collapse with each;
- ``embedded``: ``collapse`` then ``apply_id_map`` in this process (with the notification
  writes the job adds);
- ``spark``: the Spark job's two steps on ``local[2]``: the collapse grouped per tenant
  (``applyInPandas``) and the moves in ``--shards`` tasks writing the one SQLite file; the
  session starts before the clock does;
- ``job`` (``--job``): the whole embedded job (``run_id_mutation``: requests read from Kafka on
  a noida-db started here, stored, collapsed, map written and published, moves, sweep).

    python -m benchmarks.id_mutation --rows 1000000 --requests 100000 [--spark] [--job]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.id_mutation_mix import GROUPERS, OWNED, owner_rows, request_mix
from framework import App, Event, KeyedAgent, Upsert
from framework.idmutation import IdMutation, OwnerColumn, collapse
from framework.idmutation.apply import ApplyReport, apply_id_map
from framework.idmutation.job import ensure_tables
from framework.idmutation.steps import StepContext, writes_extra
from framework.jobs.batches import Batch, BatchInput
from stores.sqlite import SqliteStore

TOPIC = "idm-bench-requests"


class _Owned(KeyedAgent):
    name = "owned"
    topic = "owned-in"
    tables = (OWNED,)

    def handle(self, event: Event) -> Iterable[Upsert]:  # not used: the benchmark writes rows directly
        return []


app = App("idm-bench", agents=[_Owned()],
          id_mutation=IdMutation(TOPIC, columns=(OwnerColumn("owned", "owner", "tenant"),)))  # fmt: skip
SPEC = "benchmarks.id_mutation:app"
BATCH = Batch(1, BatchInput(files=("bench",)), 1_800_000_000_000_000)


async def build(path: Path, requests: list[Any], n_rows: int) -> float:
    started = time.perf_counter()
    store = await SqliteStore.open(path)
    await ensure_tables(store, app)
    batch: list[Upsert] = []
    for m in owner_rows(requests, n_rows):
        batch.append(m)
        if len(batch) >= 20_000:
            await store.apply(batch)
            batch = []
    await store.apply(batch)
    await store.close()
    return time.perf_counter() - started


def components(requests: list[Any]) -> None:
    by_tenant: dict[str, list[Any]] = defaultdict(list)
    for r in requests:
        by_tenant[r.tenant].append(r)
    for name, group in GROUPERS.items():
        try:
            started = time.perf_counter()
            n = sum(len(group(rs)) for rs in by_tenant.values())
            alone = time.perf_counter() - started
            started = time.perf_counter()
            collapse(requests, group=group)
            whole = time.perf_counter() - started
        except ImportError as exc:
            print(f"{name:>12}: not installed ({exc})")
            continue
        print(f"{name:>12}: components {alone:6.2f}s ({n} components); collapse {whole:6.2f}s "
              f"= {len(requests) / whole:9,.0f} requests/s")  # fmt: skip


def line(name: str, requests: int, collapse_s: float, apply_s: float, report: Any) -> None:
    total = collapse_s + apply_s
    rows = report.cells_deleted // 2
    print(
        f"{name:>10}: collapse {collapse_s:6.2f}s + apply {apply_s:6.2f}s = {total:6.2f}s; "
        f"{requests / total:9,.0f} requests/s; {report.partitions_read} partitions read, "
        f"{rows} rows moved ({rows / apply_s:9,.0f} rows/s of apply, {report.cells_moved} cells)"
    )


async def embedded(path: Path, requests: list[Any]) -> None:
    started = time.perf_counter()
    mapped = collapse(requests)
    collapse_s = time.perf_counter() - started
    store = await SqliteStore.open(path)
    ctx = StepContext(app, app.id_mutation, store, None)  # type: ignore[arg-type]
    started = time.perf_counter()
    report = await apply_id_map(store, ctx.config, mapped, extra=writes_extra(ctx, "bench", BATCH))
    apply_s = time.perf_counter() - started
    await store.close()
    line("embedded", len(requests), collapse_s, apply_s, report)


def spark_variant(path: Path, requests: list[Any], shards: int) -> None:
    from spark_batch.id_mutation import spark_applier, spark_collapser
    from spark_batch.session import spark_session
    from stores.open import sqlite_url

    spark = spark_session("idm-bench", "local[2]", {"spark.sql.shuffle.partitions": str(shards)})
    spark.range(1).count()  # start the JVM and the Python workers before the clock
    try:
        started = time.perf_counter()
        mapped = spark_collapser(spark, shards)(requests)
        collapse_s = time.perf_counter() - started
        started = time.perf_counter()
        applier = spark_applier(spark, sqlite_url(path), SPEC, shards=shards)

        async def apply() -> ApplyReport:
            return await applier("bench", BATCH, mapped)

        report = asyncio.run(apply())
        apply_s = time.perf_counter() - started
    finally:
        spark.stop()
    line(f"spark x{shards}", len(requests), collapse_s, apply_s, report)


async def job_variant(path: Path, requests: list[Any], root: Path) -> None:
    from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
    from framework.idmutation import map_topic_of
    from framework.idmutation.job import run_id_mutation
    from framework.idmutation.topic import KafkaLog
    from framework.kafka_admin import ensure_topics, produce
    from framework.local_stack import LocalStack

    stack = LocalStack(root / "stack")
    info = await asyncio.to_thread(stack.start)
    try:
        broker = info.kafka_bootstrap
        await ensure_topics(broker, {TOPIC: 2, map_topic_of(app.name): 2})
        await produce(
            broker, TOPIC, ((r.tenant.encode(), json.dumps(r.to_dict()).encode()) for r in requests)
        )
        store = await SqliteStore.open(path)
        cps, locks = SqliteCheckpointStore(root / "checkpoints.db"), SqliteDomainLocks(root / "jobs.db")
        started = time.perf_counter()
        run = await run_id_mutation(app, store, checkpoints=cps, locks=locks, log=KafkaLog(broker),
                                    until_idle=True, settle=0)  # fmt: skip
        total = time.perf_counter() - started
        await store.close()
        await cps.close()
        locks.close()
    finally:
        await asyncio.to_thread(stack.stop)
    steps = {
        name: sum(r[name]["seconds"] for r in run.reports.values()) for name in ("requests", "map", "apply")
    }
    rows = run.moved.cells_deleted // 2
    parts = ", ".join(f"{k} {v:.2f}s" for k, v in steps.items())
    rest = total - sum(steps.values())
    print(f"{'job':>10}: {total:6.2f}s = {len(requests) / total:9,.0f} requests/s, {rows} rows moved; "
          f"{parts}, sweep and the rest {rest:.2f}s")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--tenants", type=int, default=100)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--spark", action="store_true", help="also the Spark variant on local[2]")
    p.add_argument("--job", action="store_true", help="also the whole embedded job (starts a noida-db)")
    args = p.parse_args()
    requests = request_mix(args.requests, args.tenants)
    print(f"{len(requests)} requests over {args.tenants} tenants, {args.rows} rows; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    components(requests)
    root = Path(tempfile.mkdtemp(prefix="idm-bench-"))
    try:
        base = root / "base.db"
        print(f"built the table in {asyncio.run(build(base, requests, args.rows)):.1f}s")
        variants: list[tuple[str, Any]] = [("embedded", lambda p: asyncio.run(embedded(p, requests)))]
        if args.spark:
            variants.append(("spark", lambda p: spark_variant(p, requests, args.shards)))
        if args.job:
            variants.append(("job", lambda p: asyncio.run(job_variant(p, requests, root))))
        for name, run in variants:
            copy = root / f"{name}.db"
            shutil.copy(base, copy)
            print(f"[{name}: load average {os.getloadavg()[0]:.2f}]")
            run(copy)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
