"""Process figures from ``/proc`` for every benchmark: CPU seconds of a process, of a process tree,
per thread and per process class (Spark: driver, JVM, Python workers), resident memory, load.

CPU seconds are user + system time (``/proc/<pid>/stat`` fields utime and stime, with cutime and
cstime where the reaped children count) over ``SC_CLK_TCK``. A process that is gone reads as
absent (or 0.0), never as an error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = [
    "TICK",
    "SPARK_CLASSES",
    "TreeSampler",
    "command_line",
    "cpu_by_comm",
    "cpu_by_process",
    "cpu_seconds",
    "cpu_split",
    "load_average",
    "rss_mib",
    "thread_cpu",
    "threads",
    "tree",
    "tree_cpu_seconds",
]

TICK = os.sysconf("SC_CLK_TCK")
#: The process classes of a Spark job's tree (``cpu_by_process``).
SPARK_CLASSES = ("driver", "jvm", "workers", "other")


def _stat(path: Path) -> tuple[str, list[str]]:
    """The command name and the fields after it of a ``stat`` file."""
    raw = path.read_text()
    return raw[raw.index("(") + 1 : raw.rindex(")")], raw.rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds used so far by process ``pid`` (all its threads), its reaped children too when
    ``reaped``; 0.0 once it is gone."""
    try:
        fields = _stat(Path(f"/proc/{pid}/stat"))[1]
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return sum(int(x) for x in fields[11 : 15 if reaped else 13]) / TICK


def command_line(pid: int) -> str | None:
    """The command line of ``pid``, arguments joined by spaces (empty for a zombie); None once gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None


def tree(root: int) -> list[int]:
    """``root`` and its living descendants."""
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            todo += _children(p)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (reaped children included) of a process (default: this one) and its descendants."""
    return sum(cpu_seconds(p, reaped=True) for p in tree(pid or os.getpid()))


def cpu_by_process(pid: int | None = None, *, reaped: bool = True) -> dict[int, tuple[str, float]]:
    """Per process of the tree of ``pid`` (default: this one): its class and CPU seconds (reaped
    children included when ``reaped``).

    Classes: ``driver`` (the root), ``jvm`` (a ``java`` process), ``workers`` (a process under the
    JVM: Spark's Python daemon and workers), ``other`` (e.g. the embedded stack)."""
    root = pid or os.getpid()
    out: dict[int, tuple[str, float]] = {}
    todo = [(root, "driver")]
    while todo:
        p, kind = todo.pop()
        try:
            name, fields = _stat(Path(f"/proc/{p}/stat"))
            if p != root:
                kind = "jvm" if name == "java" else "workers" if kind in ("jvm", "workers") else "other"
            out[p] = (kind, sum(int(x) for x in fields[11 : 15 if reaped else 13]) / TICK)
            todo += [(c, kind) for c in _children(p)]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def cpu_split(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per class between two ``cpu_by_process`` snapshots. A process that ended between
    them counts in its parent once reaped (Spark's Python daemon reaps its workers), all its life:
    what it had used at the first snapshot is taken off again."""
    split = dict.fromkeys(SPARK_CLASSES, 0.0)
    for p, (kind, seconds) in after.items():
        split[kind] += seconds - before.get(p, (kind, 0.0))[1]
    for p, (kind, seconds) in before.items():
        if p not in after:
            split[kind] -= seconds
    return {k: round(v, 1) for k, v in split.items()}


class TreeSampler:
    """Samples the tree of a child process every ``every`` seconds from a thread, until ``stop``:
    each process's class (``cpu_by_process``) and its own CPU seconds when last seen.

    A process's CPU after its last sample is lost (at most ``every`` seconds of it)."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self.seen: dict[int, tuple[str, float]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            self.seen.update(cpu_by_process(self.pid, reaped=False))
            self._done.wait(self.every)

    def processes(self) -> dict[str, int]:
        """How many processes of each class were seen."""
        return {k: sum(1 for kind, _ in self.seen.values() if kind == k) for k in SPARK_CLASSES}

    def stop(self) -> dict[str, float]:
        """CPU seconds per class over the child's life (as sampled)."""
        self._done.set()
        self._thread.join()
        split = dict.fromkeys(SPARK_CLASSES, 0.0)
        for kind, seconds in self.seen.values():
            split[kind] += seconds
        return split


def thread_cpu(task: Path) -> tuple[str, float, float]:
    """One thread (``/proc/<pid>/task/<tid>``): its kernel name (``comm``), CPU seconds and system
    CPU seconds."""
    fields = _stat(task / "stat")[1]
    return (
        (task / "comm").read_text().strip(),
        (int(fields[11]) + int(fields[12])) / TICK,
        int(fields[12]) / TICK,
    )


def threads(pid: int) -> dict[str, dict[str, float]]:
    """Per thread id of ``pid``: its CPU seconds (``cpu``; system apart, ``sys``) and its I/O counters."""
    out: dict[str, dict[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            _, cpu, sys = thread_cpu(task)
            io = dict(line.split(": ") for line in (task / "io").read_text().splitlines())
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[task.name] = {"cpu": cpu, "sys": sys, **{k: float(v) for k, v in io.items()}}
    return out


def cpu_by_comm(pid: int | None) -> dict[str, float]:
    """CPU seconds of the threads of ``pid`` summed by their kernel name (``comm``); empty for None."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir() if pid is not None else ():
        try:
            comm, cpu, _ = thread_cpu(task)
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[comm] = out.get(comm, 0.0) + cpu
    return out


def rss_mib(pid: int) -> float:
    """The resident memory of ``pid`` in MiB (``VmRSS`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_average() -> float:
    """The one-minute load average (other work on the machine included)."""
    return round(os.getloadavg()[0], 2)
