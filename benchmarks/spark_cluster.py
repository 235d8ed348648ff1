"""The batch layer on a Spark standalone cluster against ``local[2]``: check and backfill throughput
and CPU per row per process class (issue 45).

The cluster is ``framework.local_spark.LocalSpark``: a master and two workers of one core each,
started once here, their executors of ``--executor-memory``; the drivers use its
``spark-defaults.conf`` (four shuffle partitions, the event log on). The inputs are
``benchmarks.spark_check``'s and ``benchmarks.spark_backfill``'s: ``--check-rows`` synthetic hub rows
and their documents as Parquet (0.4 % divergent; the check must report exactly that), and
``--backfill-events`` archived events of the reference platform as Parquet, backfilled into a fresh
SQLite store (every event counted, none rejected). Both are written once, before any timing.

Each round runs one driver process per master (the order alternating between rounds), ``--runs``
rounds: the process starts its session, warms up (a check of 5,000 rows and a backfill of 5,000
events), then times the check, then the backfill. CPU seconds per process class come from ``/proc``
(``benchmarks.proc_cpu.cpu_by_process``) of the driver's tree and of the cluster's daemons' trees,
between the start and the end of each timed job:

- ``driver``: the driver's Python process;
- ``driver JVM``: its JVM (on ``local[2]`` the executors run in it);
- ``daemons``: the master's and the workers' JVMs (cluster only);
- ``executors``: the executors' JVMs (cluster only; children of the workers);
- ``workers``: Spark's Python workers (under the driver's JVM on ``local[2]``, under the
  executors on the cluster).

The calibration line comes first (``benchmarks.calibration.calibrate``). Medians with their ranges.

    python -m benchmarks.spark_cluster --check-rows 1000000 --backfill-events 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_by_process, load_average
from benchmarks.spark_check_inputs import APP, expected_counts
from benchmarks.spark_runs import spread

#: The process classes of the table, in its order.
CLASSES = ("driver", "driver JVM", "daemons", "executors", "workers")
_OWN = {"driver": "driver", "jvm": "driver JVM", "workers": "workers", "other": "workers"}
_CLUSTER = {"driver": "daemons", "jvm": "executors", "workers": "workers", "other": "workers"}
WARM = 5_000
ROOT = Path(__file__).resolve().parent.parent


def snapshot(daemons: list[int]) -> dict[int, tuple[str, float]]:
    """CPU seconds (reaped children included) per process of this driver's tree and of the
    cluster's ``daemons``' trees, with its class."""
    out = {p: (_OWN[k], s) for p, (k, s) in cpu_by_process().items()}
    for pid in daemons:
        out |= {p: (_CLUSTER[k], s) for p, (k, s) in cpu_by_process(pid).items()}
    return out


def split(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per class between two snapshots (``benchmarks.proc_cpu.cpu_split``'s rule: a
    process gone in between counts in its parent once reaped, so what it had used is taken off)."""
    out = dict.fromkeys(CLASSES, 0.0)
    for p, (kind, seconds) in after.items():
        out[kind] += seconds - before.get(p, (kind, 0.0))[1]
    for p, (kind, seconds) in before.items():
        if p not in after:
            out[kind] -= seconds
    return {k: round(v, 2) for k, v in out.items()}


def _timed(job: str, n: int, daemons: list[int], run: Any) -> dict[str, Any]:
    before, started = snapshot(daemons), time.perf_counter()
    run()
    seconds, cpu = time.perf_counter() - started, split(before, snapshot(daemons))
    return {"job": job, "n": n, "seconds": round(seconds, 1), "per_s": round(n / seconds),
            "cpu_s": round(sum(cpu.values()), 1), "cpu_split": cpu, "load": load_average()}  # fmt: skip


def child(args: argparse.Namespace) -> None:
    """One driver process: warm up, then time the check and the backfill on ``args.master``."""
    from spark_batch.apps import load_app
    from spark_batch.backfill import backfill
    from spark_batch.convergence import check
    from spark_batch.session import spark_session

    work, daemons = args.workdir, [int(p) for p in args.daemons.split(",") if p]
    load_app(APP)  # imported first: a cluster's executors get its packages in the shipped zip
    spark = spark_session("converge-bench-cluster", args.master, app=APP)

    def checked(n: int) -> None:
        rows, docs = str(work / f"rows-{n}"), str(work / f"docs-{n}")
        r = check(spark, app=APP, alias=f"bench-{n}", shards=args.shards, slices=args.shards,
                  tombstones="document", store_parquet=rows, index_parquet=docs)  # fmt: skip
        r.release()
        assert r.report.counts == expected_counts(n), (r.report.counts, expected_counts(n))

    def backfilled(n: int) -> None:
        store = work / f"store-{args.master.replace('/', '_')}-{n}-{time.time_ns()}.db"
        paths = [str(work / f"archive-{n}")]
        report = backfill(spark, paths, f"sqlite:///{store}", app=APP, partitions=args.shards,
                          denylist_store="target")  # a fresh store: its own erasure deny-list  # fmt: skip
        assert report.events == n and not report.rejected, report.to_dict()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)

    checked(WARM)
    backfilled(WARM)
    for job, n, fn in (("check", args.check_rows, checked), ("backfill", args.backfill_events, backfilled)):
        if n:
            print(json.dumps({"master": args.label, **_timed(job, n, daemons, lambda fn=fn, n=n: fn(n))}))
    spark.stop()


def _prepare(work: Path, args: argparse.Namespace) -> None:
    """The Parquet inputs, written once by a ``local[2]`` session of their own (a child process)."""
    code = (
        "import sys; from pathlib import Path; "
        "from benchmarks.spark_check_inputs import write_parquet_inputs; "
        "from benchmarks.spark_backfill import write_archive; "
        "from spark_batch.session import spark_session; "
        "w = Path(sys.argv[1]); s = spark_session('converge-bench-inputs', 'local[2]'); "
        "[write_parquet_inputs(s, int(n), w, int(sys.argv[2])) for n in sys.argv[3].split(',') if int(n)]; "
        "[write_archive(int(n), w / f'archive-{n}') for n in sys.argv[4].split(',') if int(n)]; s.stop()"
    )
    checks, backfills = f"{WARM},{args.check_rows}", f"{WARM},{args.backfill_events}"
    subprocess.run([sys.executable, "-c", code, str(work), str(args.shards), checks, backfills],
                   cwd=ROOT, check=True)  # fmt: skip


def print_table(results: list[dict[str, Any]]) -> None:
    """Per job and master: medians (ranges) of seconds, rows or events per second, CPU seconds and
    CPU microseconds per row or event of each class."""
    classes = " / ".join(CLASSES)
    print(f"| job | master | n | runs | seconds | per s | CPU s | CPU µs per item: {classes} | load |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for job, master in dict.fromkeys((r["job"], r["master"]) for r in results):
        mine = [r for r in results if (r["job"], r["master"]) == (job, master)]
        n = mine[0]["n"]
        per = " / ".join(spread([r["cpu_split"][k] / n * 1e6 for r in mine], ".0f") for k in CLASSES)
        loads = f"{min(r['load'] for r in mine)}-{max(r['load'] for r in mine)}"
        print(f"| {job} | {master} | {n:,} | {len(mine)} | {spread([r['seconds'] for r in mine])} | "
              f"{spread([r['per_s'] for r in mine], ',.0f')} | {spread([r['cpu_s'] for r in mine])} | "
              f"{per} | {loads} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-rows", type=int, default=1_000_000, help="rows a check reads (0: no check)")
    ap.add_argument(
        "--backfill-events", type=int, default=1_000_000, help="events a backfill applies (0: none)"
    )
    ap.add_argument("--runs", type=int, default=5, help="rounds, each master once a round (default 5)")
    ap.add_argument("--shards", type=int, default=4, help="check shards and slices, backfill partitions")
    ap.add_argument("--executor-memory", default="1g", help="the cluster's executors' heap (default 1g)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the inputs here")
    ap.add_argument("--calibration", type=int, default=100_000, help="calibration records (0: none)")
    ap.add_argument("--json", type=Path, default=None, help="append the results as JSON lines")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master", default="local[2]", help=argparse.SUPPRESS)
    ap.add_argument("--label", default="local[2]", help=argparse.SUPPRESS)
    ap.add_argument("--daemons", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    from framework.local_spark import LocalSpark

    work = (args.workdir or Path(tempfile.mkdtemp(prefix="converge-spark-cluster-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.calibration:
        print(calibrate(work / "calibration", args.calibration), flush=True)
    _prepare(work, args)
    cluster = LocalSpark(work / "cluster", workers=2, worker_cores=1, worker_memory="2g",
                         executor_memory=args.executor_memory)  # fmt: skip
    info = cluster.start()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    masters = {
        "local[2]": ("local[2]", base, []),
        "cluster": (info.master_url, base | {"SPARK_CONF_DIR": str(cluster.driver_conf),
                                             "CONVERGE_SHARED_PATHS": str(work)},
                    [info.master_pid, *info.worker_pids]),
    }  # fmt: skip
    results: list[dict[str, Any]] = []
    try:
        for round_ in range(args.runs):
            order = list(masters) if round_ % 2 == 0 else list(reversed(masters))
            for label in order:
                master, env, daemons = masters[label]
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.spark_cluster", "--child", "--master", master,
                     "--label", label, "--daemons", ",".join(map(str, daemons)), "--workdir", str(work),
                     "--shards", str(args.shards), "--check-rows", str(args.check_rows),
                     "--backfill-events", str(args.backfill_events)],
                    cwd=ROOT, env=env, capture_output=True, text=True,
                )  # fmt: skip
                if out.returncode != 0:
                    raise SystemExit(f"{label} run failed ({out.returncode}):\n{out.stderr[-5000:]}")
                for line in out.stdout.splitlines():
                    if line.startswith("{"):
                        results.append(json.loads(line))
                        print(line, flush=True)
    finally:
        cluster.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with args.json.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in results)
    print_table(results)


if __name__ == "__main__":
    main()
