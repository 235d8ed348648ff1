"""Incremental read throughput: changed rows from notifications to a Parquet export, beside a full export.

A SQLite table of ``--rows`` rows over 20 tenants; ``--changed`` of them
(random) are then updated in micro-batches of 500 through the notification
sink (as the stream writes them). Measured in one run, on ``local[2]``:

(a) the notification read alone: the entries since the consumer's checkpoint
    gathered into changed keys (driver side);
(b) ``export_changes``: (a), the current rows of the changed keys read by the
    executors, written to Parquet, checkpoint committed: changed rows/s;
(c) for scale, the full export a consumer without notifications would need:
    every row scanned (``read_store_rows``) and written to Parquet.

    python -m benchmarks.changes_read --rows 1000000 --changed 0.01
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from framework.core.events import Event
from framework.core.mutations import CellValue, Upsert
from framework.core.schema import Column, TableSchema
from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
from framework.notifications.sink import NotificationSink
from spark_batch.changes import collect_changes, export_changes
from spark_batch.io import read_store_rows
from spark_batch.session import spark_session
from stores.sqlite import SqliteStore

TABLE = TableSchema(
    "activity",
    partition_key=(Column("org_id", "text"), Column("id", "text")),
    columns=(Column("subject", "text"), Column("n", "bigint"), Column("body", "text")),
)
T0 = 1_700_000_000_000_000


def _row(i: int, version: int) -> Upsert:
    cells: dict[str, CellValue] = {"subject": f"subject {i}", "n": version, "body": "x" * 100}
    return Upsert("activity", {"org_id": f"org{i % 20}", "id": f"a{i:08d}"}, cells, version)


def populate(path: Path, rows: int) -> float:
    """The table's rows (one version each), written straight through the engine; seconds."""
    store = SqliteStore(path)
    started = time.perf_counter()
    for schema in (TABLE, *NOTIFICATION_TABLES):
        store.engine.ensure_table(schema)
    for start in range(0, rows, 20_000):
        store.engine.apply([_row(i, T0) for i in range(start, min(rows, start + 20_000))])
    asyncio.run(store.close())
    return time.perf_counter() - started


async def change(path: Path, rows: int, changed: int) -> None:
    """``changed`` random rows updated in micro-batches of 500 with their notification entries."""
    store = await SqliteStore.open(path)
    try:
        sink = NotificationSink(
            store, "bench", NotificationConfig(), prefix="bench", clock=lambda: time.time() - 60
        )
        picked = random.Random(7).sample(range(rows), changed)
        for b in range(0, changed, 500):
            batch = [(Event(f"e{i}", f"k{i}", 1, 1, "x", {}), [_row(i, T0 + 1)]) for i in picked[b : b + 500]]
            await sink.write_batch(batch)
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--changed", type=float, default=0.01)
    args = ap.parse_args()
    changed = int(args.rows * args.changed)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "wide.db"
        print(f"{args.rows} rows over 20 tenants; populated in {populate(db, args.rows):.1f} s")
        asyncio.run(change(db, args.rows, changed))
        print(f"{changed} rows changed in {(changed + 499) // 500} micro-batches of 500, with notifications")
        spark = spark_session("converge-bench-changes", "local[2]", {"spark.sql.shuffle.partitions": "2"})
        store, cps = f"sqlite:///{db}", f"sqlite:///{Path(tmp) / 'cp.db'}"
        spark.range(10_000).write.mode("overwrite").parquet(str(Path(tmp) / "warm-up"))  # the JVM, warm
        spark.sparkContext.parallelize(range(100), 2).map(lambda x: x).count()  # Python workers up
        started = time.perf_counter()
        changes = collect_changes(store, cps, "a", settle=0)
        a = time.perf_counter() - started
        keys = sum(len(k) for k in changes.keys.values())
        print(f"(a) notifications -> changed keys     {a:7.2f} s  {keys / a:10.0f} keys/s  "
              f"({changes.entries} entries, {keys} keys)")  # fmt: skip
        started = time.perf_counter()
        report = export_changes(spark, store, cps, "b", Path(tmp) / "changes", {"activity": TABLE}, settle=0)
        b = time.perf_counter() - started
        rows = report.rows.get("activity", 0)
        print(f"(b) changed rows -> Parquet, commit    {b:7.2f} s  {rows / b:10.0f} changed rows/s  ({rows})")
        started = time.perf_counter()
        shards = spark.sparkContext.defaultParallelism
        read_store_rows(spark, store, ["activity"], shards).write.mode("overwrite").parquet(
            str(Path(tmp) / "full")
        )
        c = time.perf_counter() - started
        print(f"(c) full table -> Parquet              {c:7.2f} s  {args.rows / c:10.0f} rows/s  "
              f"({args.rows} rows)")  # fmt: skip
        print(f"    incremental export takes {b / c:.3f} of the full export's time")
        spark.stop()


if __name__ == "__main__":
    main()
