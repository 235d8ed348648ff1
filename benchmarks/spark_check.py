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

The calibration line comes first (``benchmarks.calibration.calibrate``: the raw
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
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_by_process, cpu_split, load_average, tree_cpu_seconds
from benchmarks.spark_backfill import measure_backfill
from benchmarks.spark_check_command import main_command
from benchmarks.spark_check_inputs import APP, expected_counts, populate_live, write_parquet_inputs
from benchmarks.spark_runs import print_table
from spark_batch.convergence import check
from spark_batch.session import spark_session


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
