"""The demo worker's CPU per message, this checkout against another one, runs interleaved.

    git worktree add /tmp/base <commit> && (cd /tmp/base && make .venv/.installed)
    python -m benchmarks.demo_side_by_side --base /tmp/base --runs 5 --events 100000

Prints the calibration line first (``benchmarks.calibration.calibrate``), then runs
``benchmarks.profile_demo --no-profile`` (the demo, one worker, its convergence check
included) alternately in ``--base`` and in this checkout, each with its own venv
(``<checkout>/.venv/bin/python``), and reads every run's ``run.json``: the worker's and the
broker's CPU seconds (user + system, from ``/proc``) per source message over the interval from
the first event produced to the drained group, the interval's seconds, and the load. Prints
each run, then medians with ranges per checkout and the ratio of this checkout's median worker
CPU to the base's. A run whose demo did not converge fails the benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate

HERE = Path(__file__).resolve().parent.parent


def one_run(checkout: Path, events: int, out: Path) -> dict[str, Any]:
    """One ``profile_demo`` run in ``checkout``; its ``run.json`` with per-message figures."""
    python = checkout / ".venv" / "bin" / "python"
    cmd = [str(python), "-m", "benchmarks.profile_demo", "--events", str(events), "--no-profile",
           "--calibration-records", "0", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{checkout}: profile_demo failed ({done.returncode}):\n{done.stdout[-2000:]}")
    run: dict[str, Any] = json.loads((out / "run.json").read_text())
    if run["exit_code"] != 0:  # the demo's own check: the stream did not converge to the oracle
        raise RuntimeError(f"{checkout}: the demo exited with {run['exit_code']}:\n{done.stdout[-2000:]}")
    n = run["source_messages"]
    run["worker_us"] = run["worker_cpu_s"] / n * 1e6
    run["broker_us"] = run["broker_cpu_s"] / n * 1e6
    run["load"] = os.getloadavg()[0]
    return run


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (with its .venv)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each checkout, interleaved")
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="converge-calibration-") as work:
        print(calibrate(Path(work), 200_000), flush=True)
    checkouts = {"base": args.base.resolve(), "this": HERE}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="converge-side-by-side-") as work:
        for i in range(args.runs):
            for name, checkout in checkouts.items():
                run = one_run(checkout, args.events, Path(work) / f"{name}-{i}")
                runs[name].append(run)
                print(f"{name} run {i + 1}: worker {run['worker_us']:,.0f} µs/message, broker "
                      f"{run['broker_us']:,.0f} µs/message, {run['seconds']:.1f} s, load {run['load']:.2f}",
                      flush=True)  # fmt: skip
    print(f"\n{args.events:,} events ({runs['this'][0]['source_messages']:,} source messages), "
          f"{args.runs} runs each, interleaved; medians (ranges)")  # fmt: skip
    for name, checkout in checkouts.items():
        worker = [r["worker_us"] for r in runs[name]]
        broker = [r["broker_us"] for r in runs[name]]
        seconds = [r["seconds"] for r in runs[name]]
        print(f"{name:5} {checkout}: worker {_median(worker)} µs/message, "
              f"broker {_median(broker)} µs/message, {_median(seconds)} s")  # fmt: skip
    ratio = statistics.median(r["worker_us"] for r in runs["this"]) / statistics.median(
        r["worker_us"] for r in runs["base"]
    )
    print(f"worker CPU per message, this / base: {ratio:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
