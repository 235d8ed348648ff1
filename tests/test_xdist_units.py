"""The units of work ``tests/conftest.py`` gives pytest-xdist: every path its lists name exists (a
renamed module would silently leave its unit), no path is in two lists, and the units are handed
out in their order (process faults, Spark, the long modules longest first, the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]
LISTS = {
    "PROCESS_FAULTS": conftest.PROCESS_FAULTS,
    "SPARK_IN_PROCESS": conftest.SPARK_IN_PROCESS,
    "LONG_MODULES": conftest.LONG_MODULES,
}


@pytest.mark.parametrize(("name", "path"), [(n, p) for n, paths in LISTS.items() for p in paths])
def test_each_listed_path_exists(name: str, path: str) -> None:
    assert (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file(), (name, path)


def test_no_path_is_in_two_lists() -> None:
    listed = [p for paths in LISTS.values() for p in paths]
    assert len(listed) == len(set(listed))
    for path in conftest.LONG_MODULES:
        assert conftest._scope(f"{path}::t") == path


def test_units_and_the_order_they_are_handed_out_in() -> None:
    nodeids = [
        "tests/test_keys.py::test_a",
        f"{conftest.LONG_MODULES[1]}::test_b",
        "tests/spark/test_backfill.py::test_c",
        f"{conftest.LONG_MODULES[0]}::test_d",
        "tests/faults/test_poison.py::test_e",
        "tests/jobs/test_ingest.py::test_f",
    ]
    assert [conftest._scope(n) for n in nodeids] == [
        "tests/test_keys.py", conftest.LONG_MODULES[1], "spark", conftest.LONG_MODULES[0],
        "process-faults", "spark",
    ]  # fmt: skip
    handed_out = [n.rsplit("_", 1)[1] for n in sorted(nodeids, key=conftest._rank)]
    assert handed_out == ["e", "c", "f", "d", "b", "a"]


RENICE_PROBE = """
import os, subprocess, sys, threading
from pathlib import Path
if os.getpriority(os.PRIO_PROCESS, 0) >= 19:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 18)  # room to get nicer (root may lower it)
    except PermissionError:
        sys.exit(77)
from tests import conftest
stop = threading.Event()
earlier = threading.Thread(target=stop.wait)
earlier.start()
conftest._renice(19)
tids = [int(t.name) for t in Path("/proc/self/task").iterdir()]
child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
                       capture_output=True, text=True, check=True).stdout.strip()
stop.set()
print(len(tids), *sorted({os.getpriority(os.PRIO_PROCESS, t) for t in tids}), child)
"""


def test_renice_makes_every_thread_and_later_children_nicer() -> None:
    """``_renice`` sets every thread of the process (one started before it too) and the processes
    it starts afterwards to the niceness given."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", RENICE_PROBE], cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 77:
        pytest.skip("this process is at niceness 19 and may not lower it")
    assert done.returncode == 0, done.stderr
    threads, *nice = map(int, done.stdout.split())
    assert threads >= 2 and nice == [19, 19], done.stdout  # every thread's, then the child's
