"""One full sweep (``framework.verify.sweep``) against ``converge spark check`` on the same data.

    python -m benchmarks.sweep_cost --docs 200000 --runs 5 --damage 0.001

(At 1,000,000 documents the embedded index runs a 24 GB machine out of memory once the check
opens its point in time: BENCHMARKS.md.)

The calibration line comes first (``benchmarks.calibration.calibrate``). The data: ``--docs`` hub
rows of ``benchmarks.spark_check`` in a SQLite store and their documents in the embedded stack's
index (``benchmarks.spark_check_command.populate``: alias ``bench-N``, undamaged), the
projection's own alias added to that index; both tools use ``PROJECTION.alias``. A first sweep
(no ledger yet: every document built in full) records the ledger. Both tools' index clients wait
up to 10 minutes a request (the URL's ``request_timeout``): at 1,000,000 documents noida-db takes
longer than the default 30 s to open a point in time.
Then ``--runs`` rounds, each with a fresh ``--damage`` fraction of the documents damaged (other
documents each time) in four near-equal parts: index documents deleted (``missing``), edited at
the same version (``content``), added with no partition (``orphaned``), and source rows changed at
a higher write time, with their version marks, by ``store.apply``: no notification (``stale``).
Rounds 1, 3, 5...: the check, then the sweep (which repairs). Rounds 2, 4...: the sweep first, then
a fresh damage for the check, then an unmeasured sweep repairing it. Every run (the unmeasured
ones too) must find exactly the damage, per category, and every sweep repair all of it.

The sweep runs in this process on the projection alone (``Sweep.run(views=[...])``), its CPU from
``/proc/self``: ``converge verify --sweep`` sweeps every view of the app, and the two aggregates'
contributions are not in the benchmark's store (every one would be repaired, announced on a
broker), nor can it be limited to one view. The check runs as a user runs it (a subprocess, report
only; its tree sampled by ``benchmarks.proc_cpu.TreeSampler``). The index server's (noida-db's)
CPU over each run is given apart. The check's report counts no rows: it scans every row of the
projection's tables, as the first sweep does, so its rows are the first sweep's count (``*``). A
sweep's documents built in full include those the sweep before repaired: the ledger records only
documents found right, so a repaired one whose digests moved (a ``stale`` one) is built again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import TreeSampler, cpu_seconds, load_average, tree_cpu_seconds
from benchmarks.spark_check_command import command, populate
from benchmarks.spark_check_inputs import ACTIVITY_HUB, BASE, PROJECTION
from benchmarks.spark_runs import spread
from examples.activity_platform.app import app
from framework.coordination import open_checkpoint_store
from framework.core.mutations import Mutation, Upsert
from framework.dlq import DeadLetterWAL
from framework.local_stack import LocalStack
from framework.verify.assembly import app_sweep, app_verifier
from framework.verify.sweep import Sweep
from spark_batch.io import open_index
from stores.base import IndexOp, WideColumnStore
from stores.elasticsearch.index import ElasticsearchIndex
from stores.open import open_wide_store

#: The damage kinds, in the order a round's damage is split.
KINDS = ("missing", "content", "orphaned", "stale")
ALIAS = PROJECTION.alias
#: The check's environment: this tree first on the path (the venv's install may map another).
_PATH = [str(Path(__file__).resolve().parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(_PATH)}


@dataclass
class Bench:
    """One session's data: store, index, sweep, the index server's pid and the rows left to damage."""

    n: int
    work: Path
    store_url: str
    es_url: str
    server: int
    store: WideColumnStore
    index: ElasticsearchIndex
    sweep: Sweep
    picks: Iterator[int]
    slices: int | None = None  # the check's index scan slices (None: its default)
    draws: int = 0


def split(total: int) -> dict[str, int]:
    """``total`` damaged documents in four near-equal parts, by kind."""
    return {k: total // 4 + (i < total % 4) for i, k in enumerate(KINDS)}


async def damage(b: Bench, total: int) -> dict[str, int]:
    """Damage ``total`` documents no earlier draw damaged, a quarter of each kind; the counts
    each tool must find (``spark check``'s categories)."""
    sizes = split(total)
    b.draws += 1
    picks = [next(b.picks) for _ in range(total - sizes["orphaned"])]
    hubs = [f"hub-{i:09d}" for i in picks]
    missing, content = hubs[: sizes["missing"]], hubs[sizes["missing"] : len(hubs) - sizes["stale"]]
    (name,) = await b.index.alias_indices(ALIAS)
    # one bulk request: noida-db writes its whole index state again on every write
    await b.index.client.bulk(operations=[{"delete": {"_index": name, "_id": d}} for d in missing])
    ops = [IndexOp(h.doc_id, h.version or 0, {**h.source, "subject": f"tampered {b.draws}"})
           for h in await b.index.get_many(ALIAS, content) if h is not None]  # fmt: skip
    ops += [IndexOp(f"orphan-{b.draws}-{j}", BASE, {"hub_id": f"orphan-{b.draws}-{j}", "has_record": False})
            for j in range(sizes["orphaned"])]  # fmt: skip
    written = await b.index.bulk(ALIAS, ops)
    assert len(ops) == sizes["content"] + sizes["orphaned"] and not written.failed, written.failed
    await b.index.refresh(ALIAS)
    version = BASE + 10 * b.n + 10 * b.draws  # above every synthetic row's
    rows: list[Mutation] = [Upsert(ACTIVITY_HUB.name, {"hub_id": f"hub-{i:09d}"},
                                   {"subject": f"changed {b.draws}"}, version)
                            for i in picks[len(hubs) - sizes["stale"] :]]  # fmt: skip
    await b.store.apply([*rows, *PROJECTION.version_marks(rows)])
    return {**sizes, "ahead": 0}


def figures(tool: str, times: tuple[float, float, float], read: tuple[int | None, int], built: int,
            found: int) -> dict[str, Any]:  # fmt: skip
    """One run's figures: ``times`` wall, CPU and index server CPU seconds, ``read`` store rows
    (None: not counted) and index documents."""
    seconds, cpu, server = (round(t, 2) for t in times)
    return {"tool": tool, "seconds": seconds, "cpu_s": cpu, "server_cpu_s": server, "rows_read": read[0],
            "index_read": read[1], "built": built, "found": found, "load": load_average()}  # fmt: skip


async def run_sweep(b: Bench, expected: dict[str, int], tool: str = "sweep") -> dict[str, Any]:
    """One sweep of the projection, which must find and repair exactly ``expected``; its figures."""
    cpu, server, started = cpu_seconds(os.getpid()), tree_cpu_seconds(b.server), time.perf_counter()
    report = await b.sweep.run(views=[PROJECTION.name])
    seconds = time.perf_counter() - started
    cpu, server = cpu_seconds(os.getpid()) - cpu, tree_cpu_seconds(b.server) - server
    want = {k: v for k, v in expected.items() if v}
    assert dict(report.divergent) == want == dict(report.repaired), (report.to_dict(), want)
    read = (report.rows_read, report.index_read)
    return figures(tool, (seconds, cpu, server), read, report.verified_in_full, sum(want.values()))


def run_check(b: Bench, expected: dict[str, int]) -> dict[str, Any]:
    """One ``converge spark check`` (report only), which must count exactly ``expected``; its figures."""
    report = b.work / f"check-{time.time_ns()}.json"
    cmd = command(b.n, b.store_url, b.es_url, report)
    cmd[cmd.index("--alias") + 1] = ALIAS
    if b.slices is not None:
        cmd += ["--slices", str(b.slices)]
    server, started = tree_cpu_seconds(b.server), time.perf_counter()
    with (b.work / "check.log").open("a") as log:
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=log)
        sampler = TreeSampler(proc.pid)
        _, status, _ = os.wait4(proc.pid, 0)
    seconds, cpu = time.perf_counter() - started, sum(sampler.stop().values())
    server = tree_cpu_seconds(b.server) - server
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 1, (proc.returncode, f"see {b.work / 'check.log'}")  # 1: divergent
    found = json.loads(report.read_text())[PROJECTION.name]["check"]
    assert found["counts"] == expected, (found["counts"], expected)
    read, counted = (None, found["index_docs"]), sum(found["counts"].values())
    return figures("converge spark check", (seconds, cpu, server), read, found["expected_docs"], counted)


async def session(
    n: int, runs: int, fraction: float, work: Path, urls: tuple[str, str], server: int, slices: int | None
) -> list[dict[str, Any]]:
    """The first sweep, then ``runs`` rounds (module docstring) on the store and index at ``urls``;
    every measured run's figures."""
    store_url, es_url = urls[0], f"{urls[1]}?request_timeout=600"  # the check's too
    total = max(4, round(n * fraction))
    need = (runs + runs // 2) * (total - split(total)["orphaned"])  # draws: 1 a round, 2 when odd
    if need > n:
        raise SystemExit(f"--docs {n} too few for {runs} rounds of {total} damaged documents")
    store = await open_wide_store(store_url)
    index = open_index(es_url, "document")
    checkpoints = open_checkpoint_store(f"sqlite:///{work / 'checkpoints.db'}")
    wal = DeadLetterWAL(work / "dlq")
    try:
        (name,) = await index.alias_indices(f"bench-{n}")
        await index.client.indices.update_aliases(actions=[{"add": {"index": name, "alias": ALIAS}}])
        verifier = await app_verifier(app, store, index, None, checkpoints, wal, settle=0, recheck=0)
        sweep = await app_sweep(verifier, app, checkpoints, None)
        picks = iter(random.Random(7).sample(range(n), need))
        b = Bench(n, work, store_url, es_url, server, store, index, sweep, picks, slices)
        out = [await run_sweep(b, {}, "sweep, first (no ledger)")]
        print(json.dumps(out[-1]), flush=True)
        for r in range(runs):
            measured = []
            if r % 2 == 0:
                expected = await damage(b, total)
                measured.append(await asyncio.to_thread(run_check, b, expected))
                measured.append(await run_sweep(b, expected))
            else:
                measured.append(await run_sweep(b, await damage(b, total)))
                expected = await damage(b, total)
                measured.append(await asyncio.to_thread(run_check, b, expected))
                await run_sweep(b, expected, "unmeasured")
            for m in measured:
                m["rows_read"] = m["rows_read"] if m["rows_read"] is not None else out[0]["rows_read"]
                print(json.dumps({"round": r + 1, **m}), flush=True)
            out += measured
        return out
    finally:
        wal.close()
        await checkpoints.close()
        await index.close()
        await store.close()


def print_results(results: list[dict[str, Any]], n: int) -> None:
    """Per tool: medians (min-max) of every figure."""
    print(f"\n{n:,} documents; medians (min-max); * the check's rows: every row of the projection's "
          f"tables, which its report does not count (the first sweep's count)")  # fmt: skip
    print(
        "| tool | runs | wall s | CPU s | index server CPU s | rows read | index docs read "
        "| docs built in full | divergences found | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for tool in dict.fromkeys(r["tool"] for r in results):
        mine = [r for r in results if r["tool"] == tool]
        cells = [spread([r[k] for r in mine], ".1f") for k in ("seconds", "cpu_s", "server_cpu_s")]
        cells += [spread([r[k] for r in mine], ",.0f") for k in ("rows_read", "index_read", "built", "found")]
        if tool == "converge spark check":
            cells[3] += "*"
        loads = f"{min(r['load'] for r in mine)}-{max(r['load'] for r in mine)}"
        print(f"| {tool} | {len(mine)} | {' | '.join(cells)} | {loads} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000, help="hub rows, so documents (default 1,000,000)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--damage", type=float, default=0.001, help="documents damaged a round (default 0.001)")
    ap.add_argument("--check-slices", type=int, default=None,
                    help="the check's index scan slices (default: its own, the parallelism); each opens a "
                         "point in time, which noida-db serves from a copy of the index")  # fmt: skip
    ap.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    args = ap.parse_args()
    logging.getLogger("framework.verify").setLevel(logging.ERROR)  # else a warning a divergence
    work = args.work or Path(tempfile.mkdtemp(prefix="converge-sweep-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(calibrate(work / "calibration", 100_000), flush=True)
        with LocalStack(work / "stack") as stack:
            assert stack.info is not None
            started = time.perf_counter()
            urls = populate(args.docs, work, stack.info.es_url, damaged=False), stack.info.es_url
            print(f"populated {args.docs:,} hub rows in {time.perf_counter() - started:.1f} s", flush=True)
            results = asyncio.run(
                session(args.docs, args.runs, args.damage, work, urls, stack.info.pid, args.check_slices)
            )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print_results(results, args.docs)


if __name__ == "__main__":
    main()
