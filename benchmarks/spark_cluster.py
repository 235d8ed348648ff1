"""The batch layer on a Spark standalone cluster against ``local[2]``: check and backfill throughput
and CPU per row per process class (issue 45).

The cluster is ``framework.local_spark.LocalSpark``: a master and two workers of one core each,
started once here, their executors of ``--executor-memory``; the drivers use its
``spark-defaults.conf`` (four shuffle partitions, the event log on). The inputs are
``benchmarks.spark_check``'s and ``benchmarks.spark_backfill``'s: ``--check-rows`` synthetic hub rows
and their documents as Parquet (0.4 % divergent; the check must report exactly that), and
``--backfill-events`` archived events of the reference platform as Parquet, backfilled into a fresh
SQLite store (every event counted, none rejected). Both are written once, before any timing.

One driver process per master runs every round (started once, with the cluster: its session and
executors stay up; each warms up once with a check of 5,000 rows and a backfill of 5,000 events,
untimed). A round times, on each master in turn (the order alternating between rounds), the check,
then the backfill. CPU seconds per process class come from ``/proc``
(``benchmarks.proc_cpu.cpu_by_process``) of the timing driver's tree and of the cluster's daemons'
trees, between the start and the end of each timed job (the other driver idles meanwhile; its
process tree is not counted):

- ``driver``: the driver's Python process;
- ``driver JVM``: its JVM (on ``local[2]`` the executors run in it);
- ``daemons``: the master's and the workers' JVMs (cluster only);
- ``executors``: the executors' JVMs (cluster only; children of the workers);
- ``workers``: Spark's Python workers (under the driver's JVM on ``local[2]``, under the
  executors on the cluster).

The calibration line comes first (``benchmarks.calibration.calibrate``). Medians with their ranges.
The inputs stay in ``--workdir`` and are reused by later runs (generating 1,000,000 of each takes
minutes): write them first with ``--prepare-only`` (no figure: a shared lock is enough), then time.
``--json`` appends each result as it comes, ``--budget`` starts no round that would end past that
many minutes (the longest round so far as the guess), and ``--table FILE`` prints the table of the
results in a ``--json`` file (rounds taken in several sittings, each with its calibration line)::

    python -m benchmarks.spark_cluster --workdir /tmp/cluster-1m --prepare-only
    python -m benchmarks.spark_cluster --workdir /tmp/cluster-1m --runs 5 --json /tmp/cluster-1m.jsonl
"""

from __future__ import annotations

import argparse
import functools
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
#: The line a driver prints once warmed up.
READY = "@@ready"
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
    """One driver process on ``args.master``: warm up once, then time one job a line of stdin
    (``check N`` or ``backfill N``), printing its figures as a JSON line."""
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
        try:
            # a fresh store: its own erasure deny-list
            report = backfill(spark, paths, f"sqlite:///{store}", app=APP, partitions=args.shards,
                              denylist_store="target")  # fmt: skip
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{store}{suffix}").unlink(missing_ok=True)
        assert report.events == n and not report.rejected, report.to_dict()

    jobs = {"check": checked, "backfill": backfilled}
    checked(WARM)
    backfilled(WARM)
    print(READY, flush=True)
    for line in sys.stdin:
        job, size = line.split()
        run = functools.partial(jobs[job], int(size))
        print(json.dumps({"master": args.label, **_timed(job, int(size), daemons, run)}), flush=True)
    spark.stop()


class Driver:
    """A ``child`` process on one master, started once and given one job at a time."""

    def __init__(self, label: str, master: str, env: dict[str, str], daemons: list[int], work: Path,
                 shards: int) -> None:  # fmt: skip
        self.label, self.log = label, work / f"driver-{label.replace('[', '').replace(']', '')}.log"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.spark_cluster", "--child", "--master", master,
                 "--label", label, "--daemons", ",".join(map(str, daemons)), "--workdir", str(work),
                 "--shards", str(shards)],
                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip

    def _line(self) -> str:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            if line.startswith(("{", READY)):
                return line
        tail = self.log.read_text()[-5000:]
        raise SystemExit(f"the {self.label} driver exited ({self.proc.wait()}):\n{tail}")

    def ready(self) -> None:
        """Wait until the driver has warmed up."""
        self._line()

    def run(self, job: str, n: int) -> dict[str, Any]:
        """Time ``job`` of ``n`` rows or events; its figures."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{job} {n}\n")
        self.proc.stdin.flush()
        return dict(json.loads(self._line()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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
    done = [
        work / f"{kind}-{n}" / "_SUCCESS"
        for n in map(int, checks.split(","))
        if n
        for kind in ("rows", "docs")
    ]
    done += [work / f"archive-{n}" / "_complete" for n in map(int, backfills.split(",")) if n]
    if all(p.exists() for p in done):
        return
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
    ap.add_argument("--workdir", type=Path, default=None, help="keep the inputs here (reused when complete)")
    ap.add_argument(
        "--prepare-only", action="store_true", help="write the inputs into --workdir, time nothing"
    )
    ap.add_argument("--budget", type=float, default=0, help="minutes: start no round that would end later")
    ap.add_argument("--calibration", type=int, default=100_000, help="calibration records (0: none)")
    ap.add_argument("--json", type=Path, default=None, help="append each result as a JSON line")
    ap.add_argument("--table", type=Path, default=None, help="print the table of a --json file, run nothing")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master", default="local[2]", help=argparse.SUPPRESS)
    ap.add_argument("--label", default="local[2]", help=argparse.SUPPRESS)
    ap.add_argument("--daemons", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.table:
        print_table([json.loads(line) for line in args.table.read_text().splitlines() if line.strip()])
        return
    from framework.local_spark import LocalSpark

    started = time.monotonic()
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="converge-spark-cluster-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.calibration and not args.prepare_only:
        print(calibrate(work / "calibration", args.calibration), flush=True)
    begun = time.monotonic()
    _prepare(work, args)
    print(f"inputs ready in {time.monotonic() - begun:.0f} s ({work})", flush=True)
    if args.prepare_only:
        return
    cluster = LocalSpark(work / "cluster", workers=2, worker_cores=1, worker_memory="2g",
                         executor_memory=args.executor_memory)  # fmt: skip
    info = cluster.start()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cluster_env = base | {"SPARK_CONF_DIR": str(cluster.driver_conf), "CONVERGE_SHARED_PATHS": str(work)}
    results: list[dict[str, Any]] = []
    drivers: dict[str, Driver] = {}
    jobs = [(job, n) for job, n in (("check", args.check_rows), ("backfill", args.backfill_events)) if n]
    try:
        drivers["local[2]"] = Driver("local[2]", "local[2]", base, [], work, args.shards)
        drivers["cluster"] = Driver("cluster", info.master_url, cluster_env,
                                    [info.master_pid, *info.worker_pids], work, args.shards)  # fmt: skip
        for d in drivers.values():
            d.ready()
        print(f"drivers warmed up after {time.monotonic() - started:.0f} s", flush=True)
        rounds: list[float] = []
        for round_ in range(args.runs):
            if args.budget and rounds and time.monotonic() + max(rounds) > started + args.budget * 60:
                print(f"budget: {round_} of {args.runs} rounds in {args.budget:g} min", flush=True)
                break
            begun = time.monotonic()
            order = list(drivers) if round_ % 2 == 0 else list(reversed(drivers))
            for label in order:
                for job, n in jobs:
                    results.append(drivers[label].run(job, n))
                    print(json.dumps(results[-1]), flush=True)
                    if args.json:
                        with args.json.open("a") as f:
                            f.write(json.dumps(results[-1]) + "\n")
            rounds.append(time.monotonic() - begun)
            print(f"round {round_ + 1}: {rounds[-1]:.0f} s", flush=True)
    finally:
        for d in drivers.values():
            d.close()
        cluster.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.monotonic() - started:.0f} s", flush=True)
    print_table(results)


if __name__ == "__main__":
    main()
