"""``converge spark aggregate`` throughput: entities recomputed per second on ``local[2]``.

A SQLite store of ``--entities`` synthetic tasks (one row and one version mark each: 20 teams,
3 statuses, due times over 30 days) and this module's app, with one aggregate of them: tasks,
points (sum) and the largest points per team and status in daily windows of the due time
(1,800 groups). Each run is ``spark_batch.aggregates.aggregate``, the job behind the command:
every entity's contributions by the aggregate's own ``build``, every group's totals by
``reduce``, counted.

The calibrations: first the raw aiokafka rate on this machine (``benchmarks.calibration.calibrate``),
then a plain Spark scan of the same two tables (``read_store_rows``, counted), run interleaved
with the aggregate ``--runs`` times each (after one warm-up of each). Per variant the median and
range of the wall time, entities/s (source rows/s: twice that), CPU seconds of the process tree
and CPU microseconds per entity of each process class (driver / JVM / Python workers,
``benchmarks.proc_cpu``), and the one-minute load average after each run.

    python -m benchmarks.spark_aggregate --entities 100000 --runs 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_by_process, cpu_split, load_average, tree_cpu_seconds
from benchmarks.spark_check_inputs import fill_store
from benchmarks.spark_runs import print_table
from framework import (
    Aggregate,
    App,
    Column,
    Contribution,
    Event,
    KeyedAgent,
    Row,
    TableSchema,
    Upsert,
    Window,
)
from framework.core.aggregate import MeasureKind
from framework.core.mutations import Mutation
from spark_batch.aggregates import aggregate
from spark_batch.io import read_store_rows
from spark_batch.session import spark_session

SPEC = "benchmarks.spark_aggregate:app"
TASK = TableSchema(
    "bench_task",
    (Column("task_id", "text"),),
    (Column("team", "text"), Column("status", "text"), Column("points", "double"), Column("due", "bigint")),
)
DAY = 86_400
BASE = 1_700_000_000


class TaskAgent(KeyedAgent):
    """Writes a task's cells (the store is populated directly; the app needs an agent)."""

    name = "bench_tasks"
    topic = "bench-tasks"
    tables = (TASK,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        return [Upsert(TASK.name, {"task_id": event.ordering_key}, dict(event.payload), event.version)]


class DailyByTeamStatus(Aggregate):
    """Tasks, their points and the largest per team and status, in daily windows of the due time."""

    name = "bench_daily"
    tables = (TASK,)
    group_by = ("team", "status")
    measures: ClassVar[Mapping[str, MeasureKind]] = {"tasks": "count", "points": "sum", "top": "max"}
    window = Window(DAY)

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        live = [r for r in rows["bench_task"] if r.cells]
        if not live:
            return []
        t = live[0].values()
        points = float(t.get("points") or 0.0)
        group = {"team": t["team"], "status": t["status"]}
        return [Contribution(group, {"points": points, "top": points}, at=float(str(t["due"])))]


AGGREGATE = DailyByTeamStatus()
app = App("bench-aggregate", agents=[TaskAgent()], aggregates=[AGGREGATE])


def synth(i: int) -> list[Mutation]:
    """Task ``i``'s row and version mark (deterministic)."""
    cells = {"team": f"team-{i % 20}", "status": ("open", "done", "hold")[i % 3],
             "points": float(i % 13), "due": BASE + (i * 7919) % (30 * DAY)}  # fmt: skip
    row: list[Mutation] = [Upsert(TASK.name, {"task_id": f"task-{i:09d}"}, cells, 1_000 + i)]
    return row + AGGREGATE.version_marks(row)


def populate(path: Path, n: int) -> float:
    """The tasks in a SQLite store at ``path``; seconds taken."""
    started = time.perf_counter()
    fill_store(path, app.tables, synth, n)
    return time.perf_counter() - started


def timed(fn: Callable[[], int]) -> dict[str, Any]:
    """Run ``fn`` (returns the entities it saw); wall time, CPU of the process tree, load."""
    cpu, processes, started = tree_cpu_seconds(), cpu_by_process(), time.perf_counter()
    entities = fn()
    seconds = time.perf_counter() - started
    return {
        "entities": entities,
        "seconds": seconds,
        "cpu_s": tree_cpu_seconds() - cpu,
        "cpu_split": cpu_split(processes, cpu_by_process()),
        "load": load_average(),
    }


def scan(spark: Any, url: str, shards: int) -> int:
    """The calibration: a plain scan of the source table and the marks, counted (rows / 2)."""
    tables = [TASK.name, AGGREGATE.version_table.name]
    return read_store_rows(spark, url, tables, shards).count() // 2


def recompute(spark: Any, url: str, shards: int, n: int) -> int:
    """The job: every task's contributions and every group's totals, counted."""
    report = aggregate(spark, app=SPEC, name=AGGREGATE.name, store_url=url, shards=shards)
    assert report.entities == report.contributions == n and report.groups > 0, report.to_dict()
    return report.entities


def _median(runs: list[dict[str, Any]], key: str, fmt: str = ",.1f") -> str:
    """The median of ``key`` over ``runs``, with its range. A negative CPU reading is left out: a
    Python worker that ended between the two readings without its parent reaping it took its
    seconds with it."""
    values = [r[key] for r in runs if key != "cpu_s" or r[key] >= 0]
    if not values:
        return "n/a"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shards", type=int, default=4, help="store scan shards (default 4)")
    ap.add_argument("--master", default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--calibration", type=int, default=100_000, help="calibration records (0: none)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="converge-spark-aggregate-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.calibration:
        print(calibrate(work / "calibration", args.calibration), flush=True)
    path = work / f"wide-{args.entities}.db"
    spark = spark_session("converge-bench-aggregate", args.master)
    try:
        if not path.exists():
            print(f"populated {args.entities:,} tasks in {populate(path, args.entities):.1f} s", flush=True)
        url = f"sqlite:///{path}"
        variants: dict[str, Callable[[], int]] = {
            "scan": lambda: scan(spark, url, args.shards),
            "aggregate": lambda: recompute(spark, url, args.shards, args.entities),
        }
        for fn in variants.values():  # warm-up: JVM, Python workers, SQLite page cache
            fn()
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
        for i in range(args.runs):
            for name, fn in variants.items():
                r = timed(fn)
                r["rate"] = r["entities"] / r["seconds"]
                runs[name].append(r)
                split = " / ".join(f"{r['cpu_split'][k]}" for k in ("driver", "jvm", "workers"))
                line = f"{r['seconds']:.1f} s = {r['rate']:,.0f} entities/s, CPU {r['cpu_s']:.1f} s"
                print(
                    f"  run {i + 1} {name}: {line} (driver / JVM / workers {split}), load {r['load']}",
                    flush=True,
                )
        scans = runs["scan"]
        rate = _median(scans, "rate", ",.0f")
        print(f"calibration: Spark scan of {args.entities:,} tasks and their marks (read_store_rows, "
              f"{args.shards} shards): {rate} tasks/s, medians of {args.runs}")  # fmt: skip
        for name, rs in runs.items():
            for r in rs:
                r.update(mode=name, entities_per_s=r["rate"])
        print_table([r for rs in runs.values() for r in rs], "entities")
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
