"""Spark backfill throughput: archived events of the reference platform into a SQLite store (events/s).

The archive is the reference platform's generated histories (duplicates,
replays, reordering; ``examples.activity_platform.generator``), one seed per
50,000 events, as Parquet files (``spark_batch.archive`` layout). Writing
the archive is not timed. The timed part is ``backfill`` into a fresh
SQLite store, without an index: reading the archive, parsing, routing and
mapping every event in the executors, and applying the mutations with their
version marks. Every run asserts that every event was counted and none was
rejected. A 5,000-event backfill warms the JVM and the Python workers first.
The calibration line comes first (``benchmarks.calibration.calibrate``: the
raw aiokafka rate on this machine); each size runs once a round, ``--runs``
rounds. Per size, medians with their ranges: the wall time, events/s, the CPU
seconds of this process tree and the CPU microseconds per event of each
process class (driver / JVM / Python workers, ``benchmarks.proc_cpu``), and
the one-minute load average at the end of each run (the machine may be shared).

    python -m benchmarks.spark_backfill --events 1000000 --runs 5

``benchmarks.spark_check --backfill N`` runs the same measurement in the
check's session, so both figures come from one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_by_process, cpu_split, load_average, tree_cpu_seconds
from benchmarks.spark_runs import print_table
from examples.activity_platform.generator import generate_history
from spark_batch.archive import write_parquet
from spark_batch.backfill import backfill
from spark_batch.session import spark_session

APP = "examples.activity_platform.app:app"
#: Events per generated history (one seed each).
CHUNK = 50_000


def write_archive(n: int, directory: Path) -> list[str]:
    """``n`` archived events as Parquet files under ``directory`` (generated once per size)."""
    directory.mkdir(parents=True, exist_ok=True)
    done = directory / "_complete"
    if not done.exists():
        left, seed = n, 0
        while left > 0:
            events = generate_history(1_000 + seed, min(CHUNK, left)).events[:left]
            write_parquet(events, directory / f"part-{seed:04d}.parquet")
            left -= len(events)
            seed += 1
        done.write_text(str(n))
    return [str(directory)]


def measure_backfill(
    spark: Any, n: int, work: Path, partitions: int, mode: str = "backfill"
) -> dict[str, Any]:
    """Backfill ``n`` archived events into a fresh SQLite store; the figures of that run."""
    paths = write_archive(n, work / f"archive-{n}")
    store = work / f"backfill-{n}-{time.time_ns()}.db"
    cpu, processes, started = tree_cpu_seconds(), cpu_by_process(), time.perf_counter()
    report = backfill(spark, paths, f"sqlite:///{store}", app=APP, partitions=partitions)
    seconds, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu
    split = cpu_split(processes, cpu_by_process())
    assert report.events == n and not report.rejected, report.to_dict()
    mutations = sum(sum(by_kind.values()) for by_kind in report.mutations.values())
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    return {
        "mode": mode,
        "events": n,
        "mutations": mutations,
        "seconds": round(seconds, 1),
        "events_per_s": round(n / seconds),
        "cpu_s": round(cpu, 1),
        "cpu_split": split,
        "load": load_average(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--partitions", type=int, default=4, help="archive partitions (default 4)")
    ap.add_argument("--master", default=None)
    ap.add_argument("--workdir", type=Path, default=None, help="keep the generated archives here")
    ap.add_argument("--runs", type=int, default=1, help="runs of every size, interleaved (default 1)")
    ap.add_argument("--calibration", type=int, default=100_000, help="calibration records (0: none)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="converge-spark-backfill-"))
    if args.calibration:
        print(calibrate(work / "calibration", args.calibration), flush=True)
    spark = spark_session("converge-bench-backfill", args.master)
    results = []
    try:
        measure_backfill(spark, 5_000, work, args.partitions, "warm-up")
        for _ in range(args.runs):
            for n in args.events:
                results.append(measure_backfill(spark, n, work, args.partitions))
                print(json.dumps(results[-1]), flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(results, "events")


if __name__ == "__main__":
    main()
