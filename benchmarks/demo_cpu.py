"""``converge demo`` under each garbage-collector mode, alternately: throughput and CPU per process.

    python -m benchmarks.demo_cpu --runs 3 --gc default freeze

Each run starts ``converge demo`` with ``CONVERGE_GC`` set for its workers and samples
``/proc`` of its process tree every 0.2 s: the CPU seconds (user + system) each process had
used when last seen, summed per class (the two workers, the embedded noida-db, the demo's own
process), over the whole run (start-up and the final check included).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from benchmarks.proc_cpu import command_line, cpu_seconds, load_average, tree


def _kind(cmd: str) -> str:
    if "framework.cli worker" in cmd:
        return "workers"
    if "noida-db" in cmd:
        return "noida-db"
    return "demo"


def run(gc_mode: str) -> dict[str, float | str]:
    """One demo run with the workers' ``CONVERGE_GC`` set to ``gc_mode``."""
    env = {**os.environ, "CONVERGE_GC": gc_mode}
    cmd = [sys.executable, "-c", "import sys; from framework.cli import main; sys.exit(main(['demo']))"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, tuple[str, float]] = {}
    while proc.poll() is None:
        for pid in tree(proc.pid):
            cmdline = command_line(pid)
            if cmdline is not None and cmdline.strip():
                # a process gone between the two reads reads 0.0: keep its last reading
                seen[pid] = (cmdline, max(cpu_seconds(pid), seen.get(pid, (cmdline, 0.0))[1]))
        time.sleep(0.2)
    out = proc.stdout.read() if proc.stdout else ""
    rate = re.search(r"throughput \(produce to drained\)\s*│\s*([\d,]+) events/s", out)
    divergent = re.search(r"divergent entities\s*│\s*(\d+)", out)
    result: dict[str, float | str] = {
        "gc": gc_mode,
        "events/s": rate.group(1) if rate else "?",
        "divergent": divergent.group(1) if divergent else "?",
        "load": load_average(),
    }
    for cmdline, cpu in seen.values():
        kind = _kind(cmdline)
        result[kind] = round(float(result.get(kind, 0.0)) + cpu, 1)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="alternations of the modes")
    ap.add_argument("--gc", nargs="+", default=["default", "freeze"], choices=["default", "freeze"])
    args = ap.parse_args()
    print("gc       events/s  divergent  workers CPU s  noida-db CPU s  demo CPU s  load")
    for _ in range(args.runs):
        for mode in args.gc:
            r = run(mode)
            cpu = f"{r.get('workers', 0):>13}  {r.get('noida-db', 0):>14}  {r.get('demo', 0):>10}"
            print(f"{r['gc']:8} {r['events/s']:>8}  {r['divergent']:>9}  {cpu}  {r['load']:>4}", flush=True)


if __name__ == "__main__":
    main()
