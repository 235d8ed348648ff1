"""The backfill's per-event path without Spark: ``spark_batch.backfill.backfill_task`` on one partition
of archived reference-platform events, in this process, into a fresh SQLite store (issue 45).

What a Spark Python worker does with its partition, minus Spark's row transport: parse, route, map
(the agents' mutations and the version marks), apply in batches (``--batch-size``), count, and the
app's notification entries (written every ``--notify-every`` events; a value above the partition's
size writes them once at its end, as before issue 45 bounded it). The events are generated and
held before the timing and moved out of the garbage collector's view (``gc.freeze``): a Spark
worker streams its partition, so they are not the task's. Printed as JSON: CPU seconds of this
process (user and system, both threads: the store writes in its own) and microseconds per event.
``--variants`` runs the given ``--notify-every`` values one after the other, ``--runs`` times,
interleaved. Profile a run with py-spy (``py-spy record --gil -o out.svg -- python -m
benchmarks.spark_backfill_task ...``).

    python -m benchmarks.spark_backfill_task --events 250000 --variants 20000 1000000000 --runs 2
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.proc_cpu import load_average
from benchmarks.spark_backfill import APP
from examples.activity_platform.generator import generate_history
from spark_batch import backfill as job
from spark_batch.io import WriteOptions


class _Partition:
    """``TaskContext.get()`` of a task outside Spark: partition 0."""

    @staticmethod
    def partitionId() -> int:  # noqa: N802 - pyspark's name
        return 0


def rows_of(n: int) -> list[dict[str, Any]]:
    """``n`` generated events as a Parquet archive's rows reach the task (payload decoded)."""
    out = []
    for e in generate_history(1000, n).events[:n]:
        d = e.to_dict()
        d["payload"] = json.loads(json.dumps(d["payload"], separators=(",", ":"), sort_keys=True))
        out.append(d)
    return out


def measure(rows: list[dict[str, Any]], work: Path, batch_size: int, notify_every: int) -> dict[str, Any]:
    """One task over ``rows`` into a fresh store; its figures."""
    store = work / f"task-{time.time_ns()}.db"
    url = f"sqlite:///{store}"
    job.prepare(APP, url, denylist_store="target")
    try:
        with mock.patch.object(job.TaskContext, "get", return_value=_Partition()):
            before, started = os.times(), time.perf_counter()
            out = list(job.backfill_task(url, APP, (), WriteOptions(batch_size=batch_size), iter(rows),
                                         notify_every=notify_every))  # fmt: skip
            seconds, after = time.perf_counter() - started, os.times()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
    stats = {r[1]: r[2] for r in out if r[0] == "stat"}
    n = len(rows)
    assert stats.get(("events",)) == n and stats.get(("applied",)) == n, stats
    user, system = after.user - before.user, after.system - before.system
    per = lambda s: round(s / n * 1e6, 1)  # noqa: E731
    return {"events": n, "notify_every": notify_every, "batch_size": batch_size, "seconds": round(seconds, 1),
            "cpu_s": round(user + system, 2), "us_per_event": per(user + system), "user_us": per(user),
            "sys_us": per(system), "load": load_average()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=250_000, help="events of the partition (default 250,000)")
    ap.add_argument(
        "--variants", type=int, nargs="+", default=[job.NOTIFY_EVERY], help="--notify-every values"
    )
    ap.add_argument("--batch-size", type=int, default=500, help="mutations a write (default 500, the CLI's)")
    ap.add_argument("--runs", type=int, default=1, help="rounds of every variant, interleaved")
    args = ap.parse_args()
    rows = rows_of(args.events)
    gc.collect()
    gc.freeze()  # the input is not the task's (a Spark worker streams it)
    with tempfile.TemporaryDirectory(prefix="converge-backfill-task-") as work:
        for _ in range(args.runs):
            for every in args.variants:
                print(json.dumps(measure(rows, Path(work), args.batch_size, every)), flush=True)


if __name__ == "__main__":
    main()
