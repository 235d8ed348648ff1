"""Retention throughput on one large table: rows examined/s and rows deleted/s, side by side.

A SQLite store (a file on disk) gets ``--rows`` rows of one table keyed by
(tenant, item), two cells each; ``--expired`` of them are wholly older than
the cutoff, ``--trimmed`` have one old and one new cell, the rest are new.
Then, each on its own copy of the file:

- ``dry run``: scan, resolve tenants and plan; no write;
- ``job, seal``: the coordinated job (SQLite locks and checkpoints), a
  tombstone in every partition (the default);
- ``job, no seal``: tombstones only where something is deleted;
- ``spark, seal`` (``--spark``): ``converge spark retention``'s job on
  ``local[2]``, two shards (tasks) writing the one SQLite file; the session
  starts before the clock does.

    python -m benchmarks.retention --rows 1000000 [--spark]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
from framework.retention import DAY_US, RetentionPolicy, RetentionRun, dry_run, ensure_tables, run_retention
from stores.sqlite import SqliteStore

ITEM = TableSchema(
    "item", (Column("org_id", "text"), Column("item_id", "text")), (Column("a", "text"), Column("b", "text"))
)
NOW_US = 1_700_000_000_000_000
CUTOFF = NOW_US - 180 * DAY_US


class _Items(KeyedAgent):
    name = "items"
    topic = "items-in"
    tables = (ITEM,)

    def handle(self, event: Event) -> Iterable[Upsert]:  # not used: the benchmark writes rows directly
        return []


def app(seal: bool) -> App:
    policy = RetentionPolicy(default_days=180, seal=seal)
    return App("retention-bench", agents=[_Items()], retention=policy)


def rows(n: int, expired: float, trimmed: float, tenants: int, seed: int = 11) -> Iterable[Upsert]:
    rng = random.Random(seed)
    for i in range(n):
        key = {"org_id": f"t{i % tenants:03d}", "item_id": f"{i:09d}"}
        old = CUTOFF - rng.randrange(1, 365 * DAY_US)
        new = CUTOFF + rng.randrange(0, 180 * DAY_US)
        draw = rng.random()
        if draw < expired:
            yield Upsert("item", key, {"a": f"a{i}", "b": f"b{i}"}, old)
        elif draw < expired + trimmed:
            yield Upsert("item", key, {"a": f"a{i}"}, old)
            yield Upsert("item", key, {"b": f"b{i}"}, new)
        else:
            yield Upsert("item", key, {"a": f"a{i}", "b": f"b{i}"}, new)


async def build(path: Path, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    store = await SqliteStore.open(path)
    await ensure_tables(store, app(True))
    batch: list[Upsert] = []
    for m in rows(args.rows, args.expired, args.trimmed, args.tenants):
        batch.append(m)
        if len(batch) >= 10_000:
            await store.apply(batch)
            batch = []
    await store.apply(batch)
    await store.close()
    return time.perf_counter() - started


async def variant(name: str, path: Path, root: Path) -> tuple[float, float, int, int, int]:
    """Wall seconds, CPU seconds, rows examined, rows deleted, rows trimmed."""
    store = await SqliteStore.open(path)
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if name == "dry run":
        run = await dry_run(store, app(True), now=NOW_US / 1e6)
    elif name == "spark, seal":
        await store.close()
        run = await asyncio.to_thread(_spark_run, path, root)
        store = await SqliteStore.open(path)
    else:
        checkpoints, locks = SqliteCheckpointStore(root / "cp.db"), SqliteDomainLocks(root / "jobs.db")
        try:
            run = await run_retention(
                app(name == "job, seal"),
                store,
                checkpoints=checkpoints,
                locks=locks,
                clock=lambda: NOW_US / 1e6,
            )
        finally:
            checkpoints.close_sync()
            locks.close()
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    await store.close()
    r = run.tables["item"]
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return wall, cpu, r.rows, r.rows_deleted, r.rows_trimmed


def _spark_run(path: Path, root: Path) -> RetentionRun:
    from spark_batch.retention import spark_retention
    from spark_batch.session import spark_session

    spark = spark_session("retention-bench", "local[2]")
    checkpoints, locks = SqliteCheckpointStore(root / "cp.db"), SqliteDomainLocks(root / "jobs.db")
    try:
        return spark_retention(
            spark,
            "benchmarks.retention:BENCH_APP",
            f"sqlite:///{path.resolve()}",
            checkpoints=checkpoints,
            locks=locks,
            shards=2,
            clock=lambda: NOW_US / 1e6,
        )
    finally:
        checkpoints.close_sync()
        locks.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--expired", type=float, default=0.4, help="share of rows wholly older than the cutoff")
    ap.add_argument("--trimmed", type=float, default=0.1, help="share of rows with one old and one new cell")
    ap.add_argument("--tenants", type=int, default=50)
    ap.add_argument("--spark", action="store_true", help="also the Spark job (local[2], two shards)")
    ap.add_argument("--dir", default=None, help="where the store files go (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp) / "base.db"
        seconds = asyncio.run(build(base, args))
        size = base.stat().st_size / 2**20
        print(
            f"{args.rows} rows ({args.expired:.0%} expired, {args.trimmed:.0%} trimmed, "
            f"{args.tenants} tenants) "
            f"written in {seconds:.1f}s; store file {size:.0f} MiB; load average {os.getloadavg()[0]:.2f}"
        )
        print(
            f"{'variant':<16}{'wall s':>9}{'cpu s':>8}{'examined/s':>12}{'deleted/s':>11}"
            f"{'deleted':>10}{'trimmed':>10}  load"
        )
        if args.spark:  # start the JVM and the session outside the measured run
            from spark_batch.session import spark_session

            spark_session("retention-bench", "local[2]").sparkContext.parallelize([1], 1).count()
        for name in ("dry run", "job, seal", "job, no seal", *(("spark, seal",) if args.spark else ())):
            root = Path(tmp) / name.replace(", ", "-").replace(" ", "-")
            root.mkdir()
            copy = root / "wide.db"
            for suffix in ("", "-wal"):
                if Path(f"{base}{suffix}").exists():
                    shutil.copy(f"{base}{suffix}", f"{copy}{suffix}")
            wall, cpu, examined, deleted, trimmed = asyncio.run(variant(name, copy, root))
            print(
                f"{name:<16}{wall:>9.1f}{cpu:>8.1f}{examined / wall:>12,.0f}{deleted / wall:>11,.0f}"
                f"{deleted:>10}{trimmed:>10}  {os.getloadavg()[0]:.2f}"
            )
            copy.unlink()


if __name__ == "__main__":
    main()


#: The app as Spark tasks load it (seal on).
BENCH_APP = app(True)
