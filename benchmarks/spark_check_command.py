"""``converge spark check`` as a user runs it, on a small live input: wall time, CPU per process
class, and where the time of one check goes (``benchmarks.spark_check --command`` / ``--phases``).

The input: ``N`` synthetic hub rows of ``benchmarks.spark_check_inputs`` in a SQLite store and their
documents (0.4 % damaged) in the embedded stack's index, written without Spark. Each run starts
``converge spark check`` in a subprocess (the JVM's start included) and asserts the report's counts
are exactly the damage; its process tree (the command's Python driver, the Spark JVM, Spark's
Python workers) is sampled from ``/proc`` every 0.1 s (``benchmarks.proc_cpu.TreeSampler``; the
JVM is not reaped by the driver, so ``os.wait4``'s usage would miss it).

The phases, in one process: imports, session creation (JVM start), then each part of the check
as its own Spark action, in the order a check meets them (the first Python task starts the
workers), then the whole ``check`` twice.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.proc_cpu import TreeSampler, cpu_by_process, cpu_split, load_average
from benchmarks.spark_check_inputs import APP, PROJECTION, expected_counts, populate_live
from benchmarks.spark_runs import CLASSES, print_table


def populate(n: int, work: Path, es_url: str, damaged: bool = True) -> str:
    """``n`` hub rows in a SQLite store under ``work`` and their documents (0.4 % ``damaged``) under
    the alias ``bench-N``, built in this process (no Spark); the store URL."""
    from spark_batch.io import WriteOptions
    from spark_batch.reindex import build_task

    def build(store_url: str, target: str, shards: int) -> None:
        task = build_task(
            APP,
            PROJECTION.name,
            store_url,
            es_url,
            "document",
            target,
            shards,
            WriteOptions(batch_size=1000),
            range(shards),
        )
        for _ in task:
            pass

    url, _ = populate_live(None, n, work, es_url, f"bench-{n}", 1, build=build, damaged=damaged)
    return url


def command(n: int, store_url: str, es_url: str, report: Path) -> list[str]:
    """The command line a user runs to check the benchmark's ``n`` rows."""
    converge = str(Path(sys.executable).parent / "converge")
    return [
        converge,
        "spark",
        "check",
        "--app",
        APP,
        "--store",
        store_url,
        "--es-url",
        es_url,
        "--alias",
        f"bench-{n}",
        "--es-tombstones",
        "document",
        "--report",
        str(report),
        "--quiet",
    ]


def run_command(
    n: int, store_url: str, es_url: str, work: Path, master: str | None, tree: tuple[str, str | None]
) -> dict[str, Any]:
    """One ``converge spark check`` of the ``n`` rows, with the project tree ``tree`` (label, a
    directory put first on ``PYTHONPATH`` or None for this one): wall seconds, CPU seconds per class."""
    report = work / f"check-{n}-{time.time_ns()}.json"
    env = dict(os.environ)
    if tree[1] is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree[1], *filter(None, [env.get("PYTHONPATH")])])
    if master:
        env["CONVERGE_SPARK_MASTER"] = master
    started = time.perf_counter()
    proc = subprocess.Popen(
        command(n, store_url, es_url, report),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = TreeSampler(proc.pid)
    _, status, _ = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    split = sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 1, (proc.returncode, err[-2000:])  # divergent: exit status 1
    found = json.loads(report.read_text())
    counts = next(iter(found.values()))["check"]["counts"]
    assert counts == expected_counts(n), (counts, expected_counts(n))
    return {
        "mode": tree[0],
        "rows": n,
        "seconds": round(seconds, 2),
        "rows_per_s": round(n / seconds),
        "cpu_s": round(sum(split.values()), 2),
        "cpu_split": {k: round(split[k], 2) for k in CLASSES},
        "processes": sampler.processes(),
        "load": load_average(),
    }


#: A part of a check: its label, wall seconds, CPU seconds per process class.
Part = tuple[str, float, dict[str, float]]


def _timed(label: str, fn: Callable[[], Any], out: list[Part]) -> Any:
    processes, started = cpu_by_process(), time.perf_counter()
    value = fn()
    out.append((label, time.perf_counter() - started, cpu_split(processes, cpu_by_process())))
    print(f"{label}: {out[-1][1]:.2f} s", flush=True)
    return value


def phases(n: int, store_url: str, es_url: str, master: str | None, conf: dict[str, str]) -> list[Part]:
    """Seconds of each part of a check of the ``n`` rows, in one fresh process's order, on a session
    with ``spark_session``'s conf and ``conf``."""
    out: list[Part] = []
    _timed("interpreter start (python -c pass)", lambda: subprocess.run([sys.executable, "-c", "pass"]), out)
    _timed("interpreter start and the command's imports", _import_check, out)
    from pyspark import SparkConf, SparkContext

    from spark_batch.convergence import check, expected_documents
    from spark_batch.io import read_index
    from spark_batch.session import _python_env, default_master, session_conf, spark_session

    _python_env()
    master = master or default_master()
    settings = SparkConf().setAll(list(session_conf(master, conf, short=True).items()))
    _timed("JVM start (the Py4J gateway)", lambda: SparkContext._ensure_initialized(conf=settings), out)
    spark = _timed(
        "SparkContext and SparkSession",
        functools.partial(spark_session, "phases", master, conf, short=True),
        out,
    )
    shards = spark.sparkContext.defaultParallelism
    _timed("first Spark action (a local count, no Python)", lambda: spark.range(10).count(), out)
    _timed(
        "first Python task (Python workers start)",
        lambda: spark.sparkContext.parallelize(range(shards), shards).map(lambda x: x).count(),
        out,
    )
    expected = functools.partial(expected_documents, spark, APP, PROJECTION.name, store_url, shards)
    _timed("store read and projection (expected documents, counted)", lambda: expected().count(), out)
    alias = f"bench-{n}"
    index = functools.partial(read_index, spark, es_url, alias, shards, tombstones="document")
    _timed("index scroll (documents, counted)", lambda: index().count(), out)
    kw = dict(
        app=APP,
        alias=alias,
        store_url=store_url,
        es_url=es_url,
        tombstones="document",
        shards=shards,
        slices=shards,
    )
    for label in ("whole check (first)", "whole check (again)"):
        run = _timed(label, lambda: check(spark, **kw), out)
        run.release()
    _timed("session stop", spark.stop, out)
    return out


def _import_check() -> None:
    """A fresh interpreter importing what ``converge spark check`` imports and loading the app."""
    code = (
        "import framework.cli, framework.cli.spark, spark_batch.convergence, spark_batch.preflight, "
        f"spark_batch.report, spark_batch.session; from spark_batch.apps import load_app; load_app({APP!r})"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def main_command(args: Any, work: Path) -> None:
    """``--phases N`` and ``--command N...`` of ``benchmarks.spark_check`` on one embedded stack."""
    from framework.local_stack import LocalStack

    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        es_url = stack.info.es_url
        urls: dict[int, str] = {}
        for n in sorted({*args.command, *([args.phases] if args.phases else [])}):
            started = time.perf_counter()
            urls[n] = populate(n, work, es_url)
            print(f"populated {n:,} hub rows in {time.perf_counter() - started:.1f} s", flush=True)
        if args.phases:
            conf = dict(c.split("=", 1) for c in args.conf)
            parts = phases(args.phases, urls[args.phases], es_url, args.master, conf)
            print(f"| part of a check of {args.phases:,} rows | seconds | CPU s driver / JVM / workers |")
            print("|---|---:|---:|")
            for label, seconds, cpu in parts:
                print(f"| {label} | {seconds:.2f} | {' / '.join(str(cpu[k]) for k in CLASSES)} |")
        results: list[dict[str, Any]] = []
        trees: list[tuple[str, str | None]] = [("this tree", None)]
        trees += [(label, str(Path(d).resolve())) for label, _, d in (t.partition("=") for t in args.tree)]
        for _ in range(args.runs):  # interleaved: every tree and size once a round
            for tree in trees:
                for n in args.command:
                    results.append(run_command(n, urls[n], es_url, work, args.master, tree))
                    print(json.dumps(results[-1]), flush=True)
    if results:
        print(" ".join(command(n, "sqlite:///WIDE.db", "ES_URL", Path("REPORT.json"))))
        print_table(results, "rows")
