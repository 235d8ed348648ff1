"""A py-spy profile of ``converge demo``'s worker over its processing interval, with the CPU
seconds of the worker and of the broker over the same interval.

    python -m benchmarks.profile_demo --events 100000 --out /tmp/prof --py-spy /tmp/pyspy/bin/py-spy

Prints the calibration line first (``benchmarks.calibration.calibrate``: the raw aiokafka rate
on this machine), then runs the demo (``examples.demo.run_demo``, one worker by default, its
convergence check included) and, from just before the first event is produced until the group
has drained every topic, records the worker with ``py-spy record --format raw`` (collapsed
stacks) and reads ``/proc`` of the worker (per thread) and of noida-db (per thread name) at both
ends. Writes ``<out>/worker.txt`` (the stacks) and ``<out>/run.json`` (interval, CPU seconds,
messages per topic, load); attribute the stacks with ``benchmarks.profile_buckets``. py-spy is
not a dependency of the project: install it in a scratch venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import examples.demo as demo
from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import command_line, cpu_by_comm, cpu_seconds, threads, tree
from framework.kafka_admin import end_offsets

_start_worker = demo.start_worker


def _broker_pid() -> int | None:
    for pid in tree(os.getpid()):
        if "noida-db" in (command_line(pid) or ""):
            return pid
    return None


def _cpu(pid: int | None) -> float:
    return cpu_seconds(pid) if pid is not None and command_line(pid) is not None else float("nan")


def _thread_names(py_spy: str, pid: int) -> dict[str, str]:
    """The Python name of each thread of ``pid`` by its OS thread id (``py-spy dump``)."""
    try:
        dump = subprocess.run(
            [py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:  # no py-spy: the threads are told apart by /proc only
        return {}
    return dict(re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', dump.stdout, flags=re.M))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


class _Recorder:
    """Starts py-spy and the CPU readings before the first produce; stops them once drained."""

    def __init__(self, py_spy: str, out: Path, rate: int, flags: list[str], record: bool) -> None:
        self.py_spy, self.out, self.rate, self.flags, self.record = py_spy, out, rate, flags, record
        self.workers: list[Any] = []
        self.broker = ""
        self.spy: subprocess.Popen[bytes] | None = None
        self.run: dict[str, Any] = {}

    def start_worker(self, app: str, data_dir: Path, broker: str, env: dict[str, str]) -> Any:
        self.broker = broker
        proc = _start_worker(app, data_dir, broker, env)
        self.workers.append(proc)
        return proc

    def begin(self) -> None:
        worker = self.workers[0].pid
        if self.record:
            cmd = [self.py_spy, "record", "--pid", str(worker), "--rate", str(self.rate), "--format", "raw"]
            cmd += ["-o", str(self.out / "worker.txt"), *self.flags]
            log = open(self.out / "py-spy.log", "wb")  # noqa: SIM115 - py-spy's, until it exits
            self.spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
            time.sleep(1.0)  # py-spy attached
        broker = _broker_pid()
        self.run.update(uptime_before=_uptime(), started=time.time(), worker_pid=worker, broker_pid=broker)
        self.run.update(worker_cpu0=_cpu(worker), broker_cpu0=_cpu(broker), threads0=threads(worker))
        self.run["broker_threads0"] = cpu_by_comm(broker)

    def end(self) -> None:
        worker, broker = self.run["worker_pid"], self.run["broker_pid"]
        self.run.update(ended=time.time(), worker_cpu1=_cpu(worker), broker_cpu1=_cpu(broker))
        self.run.update(threads1=threads(worker), uptime_after=_uptime())
        self.run["broker_threads1"] = cpu_by_comm(broker)
        if self.spy is not None:
            self.spy.send_signal(signal.SIGINT)  # py-spy writes its file and detaches
            self.spy.wait(60)
        self.run["thread_names"] = _thread_names(self.py_spy, worker)  # once record has detached

    async def count_messages(self) -> None:
        """The messages in each of the app's topics (the run's own: its stack is new)."""
        self.run["messages"] = {
            t: sum((await end_offsets(self.broker, t)).values()) for t in demo.app.topics()
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=1, help="worker processes (the first is profiled)")
    ap.add_argument("--out", type=Path, required=True, help="directory for worker.txt and run.json")
    ap.add_argument("--py-spy", default="py-spy", help="the py-spy executable")
    ap.add_argument("--rate", type=int, default=200, help="samples per second")
    ap.add_argument(
        "--native", action="store_true", help="py-spy --native (C frames; slows the worker a lot)"
    )
    ap.add_argument("--gil", action="store_true", help="py-spy --gil (only samples holding the GIL)")
    ap.add_argument("--calibration-records", type=int, default=200_000, help="0: no calibration line")
    ap.add_argument("--no-profile", action="store_true", help="only the CPU readings (py-spy's own cost)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    calibration = ""
    if args.calibration_records:
        with tempfile.TemporaryDirectory(prefix="converge-calibration-") as work:
            calibration = calibrate(Path(work), args.calibration_records)
        print(calibration, flush=True)
    flags = [f for f, on in (("--native", args.native), ("--gil", args.gil)) if on]
    rec = _Recorder(args.py_spy, args.out, args.rate, flags, record=not args.no_profile)
    produce, drained = demo.produce, demo.wait_all_drained

    async def first_produce(broker: str, topic: str, records: Any) -> int:
        if "started" not in rec.run:
            rec.begin()
        return await produce(broker, topic, records)

    async def until_drained(*a: Any, **kw: Any) -> bool:
        ok = await drained(*a, **kw)
        rec.end()
        await rec.count_messages()
        return ok

    demo.start_worker = rec.start_worker  # type: ignore[assignment]
    demo.produce = first_produce
    demo.wait_all_drained = until_drained
    code = demo.run_demo(events=args.events, workers=args.workers)
    r = rec.run
    sources = {a.topic for a in demo.app.agents}
    r["source_messages"] = sum(n for t, n in r["messages"].items() if t in sources)
    r.update(
        calibration=calibration,
        events=args.events,
        exit_code=code,
        rate=args.rate,
        flags=flags,
        profiled=not args.no_profile,
    )
    r["seconds"] = r["ended"] - r["started"]
    r["worker_cpu_s"] = r["worker_cpu1"] - r["worker_cpu0"]
    r["broker_cpu_s"] = r["broker_cpu1"] - r["broker_cpu0"]
    was = r.pop("broker_threads0")
    r["broker_threads"] = {k: round(v - was.get(k, 0.0), 2) for k, v in r.pop("broker_threads1").items()}
    before = r.pop("threads0")
    r["threads"] = {
        tid: {k: v - before.get(tid, {}).get(k, 0.0) for k, v in now.items()}
        for tid, now in r.pop("threads1").items()
    }
    (args.out / "run.json").write_text(json.dumps(r, indent=2))
    print(
        json.dumps(
            {k: r[k] for k in ("exit_code", "seconds", "worker_cpu_s", "broker_cpu_s", "messages")}, indent=2
        )
    )
    n = r["source_messages"]
    print(f"{n} source messages; {r['worker_cpu_s'] / n * 1e6:.0f} worker CPU µs/message, "
          f"{r['broker_cpu_s'] / n * 1e6:.0f} broker CPU µs/message")  # fmt: skip


if __name__ == "__main__":
    main()
