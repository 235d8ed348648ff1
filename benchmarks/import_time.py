"""Import time of ``import framework`` and of a worker's start, from ``python -X importtime``.

Each statement runs in a fresh interpreter (``--python``, default this one) from an empty
working directory, ``--repeat`` times; the figure is the median of the summed cumulative
times of the top-level imports (interpreter start-up's ``site`` and ``encodings`` included),
and of the CPU time of the whole process (less sensitive to other load than the wall clock),
with the imports of the median run that took longest, cumulatively (an import's time includes
the imports it made), and the optional packages (extras) that ended up loaded. The worker's
start is what ``converge worker examples.support_desk.app:app`` does before it connects:
import the app and build its Faust worker (``framework.worker.load_app``).

    python -m benchmarks.import_time --repeat 5
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile

STATEMENTS = {
    "import framework": "import framework",
    "worker start": (
        "from framework.worker.loading import load_app; load_app('examples.support_desk.app:app')"
    ),
}
#: The packages of the extras: loaded by neither statement in a lean worker.
OPTIONAL = ("pyspark", "pandas", "pyarrow", "matplotlib", "hypothesis", "kazoo", "noida_db", "numpy")
_REPORT = "import sys; print(' '.join(m for m in {optional!r} if m in sys.modules), len(sys.modules))"


def measure(python: str, statement: str, cwd: str) -> tuple[float, float, list[tuple[int, str]], str, int]:
    """(total ms, the process's CPU ms, [(cumulative µs, module)] slowest first, optional packages
    loaded, modules loaded)."""
    env = {
        **os.environ,
        "CONVERGE_DATA_DIR": os.path.join(cwd, "data"),
        "CONVERGE_BROKER": "kafka://127.0.0.1:1",  # never contacted: the worker is only built
        "CONVERGE_ES_URL": "http://127.0.0.1:1",
    }
    code = f"{statement}; {_REPORT.format(optional=OPTIONAL)}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [python, "-X", "importtime", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    lines: list[tuple[int, str]] = []
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line.removeprefix("import time:").split("|", 2)
        name = name[1:]  # one space after the bar; more for an import made by another one
        if not name.startswith(" "):  # a top-level import: the others are inside its time
            total += int(cumulative)
        lines.append((int(cumulative), name.strip()))
    loaded, _, count = done.stdout.strip().rpartition(" ")
    return total / 1000, cpu, sorted(lines, reverse=True), loaded, int(count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter to measure (default: this one)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=10, help="slowest imports to list")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        for label, statement in STATEMENTS.items():
            runs = [measure(args.python, statement, cwd) for _ in range(args.repeat)]
            runs.sort(key=lambda r: r[0])
            total, _, top, loaded, count = runs[len(runs) // 2]
            cpu = sorted(r[1] for r in runs)
            print(f"{label}: median {total:.0f} ms ({runs[0][0]:.0f}-{runs[-1][0]:.0f}), "
                  f"process CPU median {cpu[len(cpu) // 2]:.0f} ms ({cpu[0]:.0f}-{cpu[-1]:.0f}), "
                  f"{count} modules, optional loaded: {loaded or 'none'}")  # fmt: skip
            for cumulative, name in top[: args.top]:
                print(f"  {cumulative / 1000:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
