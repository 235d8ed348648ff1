"""Where the time goes: (c), (c0) and the Quix Streams peer under py-spy (issue 44, item 2).

    python -m benchmarks.profile_peer --events 200000 --runs 3 --out /tmp/peerprof \\
        --py-spy /tmp/pyspy/bin/py-spy --quix-venv /tmp/converge-quix-venv
    python -m benchmarks.profile_peer --report /tmp/peerprof

For each run and variant: a fresh topic (4 partitions) and the variant's process (the
``bench_apps`` keyed worker, with or without the no-op sink; ``quix_app.py`` under the scratch
venv), left to start and join until its CPU is quiet; then ``py-spy record --format raw`` is
attached, every thread's CPU read from ``/proc``, and only then the events are produced. At the
variant's own result (its ``--events``-th finished event) the threads are read again and py-spy
is stopped. Each thread's CPU is divided among its samples' stages (``stage_of``): fetch, decode,
scheduling, map, store write, commit, event loop, other; threads py-spy sees no Python frames in
(librdkafka's, uvloop's helpers) are given by their kernel name. Standard library and the project
only; py-spy and quixstreams live in scratch venvs (``benchmarks/PROFILE.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.calibration import calibrate, make_records
from benchmarks.proc_cpu import cpu_seconds, thread_cpu
from benchmarks.profile_buckets import Sample, read_samples
from benchmarks.quix_peer import APP, QUIX_VENV, scratch_venv
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker

STAGES = ("fetch", "decode", "scheduling", "map", "store write", "commit", "event loop", "other")

#: Ordered (stage, patterns): a sample goes to the first stage with a pattern matching one of its
#: frames (a pattern is a prefix of the frame's file, or of ``function (file``).
CONVERGE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("other", ("logging/", "terminaltables/", "framework/metrics/", "framework/runtime/counters.py",
               "Meter.tick (")),
    ("commit", (
        "KeyedScheduler.finish (", "KeyedScheduler._finish (", "framework/runtime/offsets.py",
        "Consumer.commit", "Consumer._commit", "Consumer.ack (", "Event.ack (faust",
        "aiokafka/consumer/group_coordinator.py", "framework/runtime/committed_seek.py",
    )),
    ("store write", ("stores/", "framework/runtime/sinks.py", "LatencyStoreSink.", "concurrent/futures/")),
    ("decode", ("framework/core/events.py", "json/", "faust/serializers/", "parse_work (")),
    ("map", ("framework/runtime/mapping.py", "BenchAgent.handle (", "framework/core/mutations.py",
             "AgentProcessor.map_batch (", "framework/core/")),
    ("fetch", ("aiokafka/", "faust/transport/", "framework/runtime/fetch_pacing.py",
               "framework/runtime/handover.py", "framework/runtime/intake.py", "mode/threads.py")),
    ("scheduling", ("framework/runtime/", "faust/", "mode/", "asyncio/")),
)  # fmt: skip
QUIX_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("other", ("logging/", "quixstreams/logging.py", "processed (", "cpu_seconds (")),
    ("store write: checkpoint flush (RocksDB, changelog)", (
        "PartitionTransaction.prepare (", "PartitionTransaction.flush (", "RocksDBStorePartition.write (",
    )),
    ("store write", ("quixstreams/state/", "rocksdict")),
    ("commit", ("quixstreams/checkpointing/", "ProcessingContext.commit_checkpoint", "InternalProducer.flush",
                "store_offset (")),
    ("decode", ("quixstreams/models/serializers/", "Topic.row_deserialize (", "json/", "orjson")),
    ("map", ("keep_latest (",)),
    ("fetch", ("quixstreams/kafka/", "quixstreams/rowconsumer.py", "confluent_kafka/",
               "InternalConsumer.", "RowConsumer.", "BaseConsumer.")),
    ("scheduling", ("quixstreams/",)),
)  # fmt: skip
#: Leaves that are the event loop's own run call (uvloop's C code: I/O and polling).
_LOOP_LEAVES = ("Worker.execute_from_commandline (", "ServiceThread._start_thread (")


def _match(frame: str, patterns: tuple[str, ...]) -> bool:
    fn, _, rest = frame.partition(" (")
    file = rest.rsplit(":", 1)[0].rstrip(")")
    return any(file.startswith(p) or f"{fn} ({file}".startswith(p) or fn.startswith(p) for p in patterns)


def stage_of(sample: Sample, quix: bool) -> str:
    """The stage of one sample of (c)/(c0) or, with ``quix``, of the Quix app."""
    if not quix and _match(sample.frames[-1], _LOOP_LEAVES):
        return "event loop"
    for stage, patterns in QUIX_RULES if quix else CONVERGE_RULES:
        if any(_match(f, patterns) for f in sample.frames):
            return stage
    return "other"


def _thread_kind(name: str | None, comm: str) -> str:
    """``main``, ``store`` (converge's SQLite thread), ``python`` (another thread with Python
    frames) or ``native:<comm>`` (no Python name: librdkafka's, uvloop's helpers)."""
    if name is None:
        return f"native:{re.sub(r'[0-9]+$', '', comm)}"
    if name == "MainThread":
        return "main"
    return "store" if name.startswith("converge-sqlite") else "python"


def _threads(pid: int) -> dict[str, tuple[str, float]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm, cpu, _ = thread_cpu(task)
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[task.name] = (comm, cpu)
    return out


def _names(py_spy: str, pid: int) -> dict[str, str]:
    dump = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False)
    return dict(re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', dump.stdout, flags=re.M))


def _quiet(pid: int, start: float = 3.0, below: float = 0.05, most: float = 60.0) -> None:
    """Wait until ``pid`` used under ``below`` CPU seconds in a second (after ``start`` s)."""
    time.sleep(start)
    deadline = time.monotonic() + most
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        if now - last < below:
            return
        last = now


def profile_one(variant: str, bootstrap: str, n: int, keys: int, out: Path, py_spy: str,
                quix_python: Path, flags: list[str]) -> dict[str, Any]:  # fmt: skip
    """One profiled run of ``variant`` (``c``, ``c0`` or ``quix``) over ``n`` fresh events."""
    out.mkdir(parents=True)
    topic = f"prof-{variant}-{uuid.uuid4().hex[:6]}"
    broker = f"kafka://{bootstrap}"
    asyncio.run(ensure_topics(broker, {topic: 4}))
    result = out / "result.json"
    if variant == "quix":
        cmd = [
            str(quix_python),
            str(APP),
            "--broker",
            bootstrap,
            "--topic",
            topic,
            "--group",
            topic,
            "--events",
            str(n),
            "--state-dir",
            str(out / "state"),
            "--out",
            str(result),
            "--linger",
            "30",
        ]
        log = open(out / "app.log", "wb")  # noqa: SIM115 - the child's
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        done = out / "result.json.ckpt"  # its checkpoint after the last event: before it closes
    else:
        env = {"BENCH_VARIANT": "keyed", "BENCH_GROUP": topic, "BENCH_TOPIC": topic, "BENCH_EVENTS": str(n),
               "BENCH_LATENCY_MS": "0", "BENCH_NOOP_SINK": "1" if variant == "c0" else "0"}  # fmt: skip
        proc = start_worker("benchmarks.bench_apps:build", out, broker, env)
        result = out / "bench-result.json"
        done = result
    try:
        _quiet(proc.pid)
        spy = subprocess.Popen([py_spy, "record", "--pid", str(proc.pid), "--rate", "200", "--format", "raw",
                                "-o", str(out / "profile.txt"), *flags],
                               stdout=subprocess.DEVNULL, stderr=open(out / "py-spy.log", "wb"))  # noqa: SIM115 # fmt: skip
        time.sleep(1.0)
        before, up0, t0 = _threads(proc.pid), os.getloadavg()[0], time.monotonic()
        process0 = cpu_seconds(proc.pid)
        asyncio.run(produce(broker, topic, make_records(n, keys)))
        while not done.exists():
            if proc.poll() is not None or time.monotonic() - t0 > 900:
                raise RuntimeError(f"{variant} failed; see {out}")
            time.sleep(0.1)
        after, up1 = _threads(proc.pid), os.getloadavg()[0]
        process1 = cpu_seconds(proc.pid)
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        names = _names(py_spy, proc.pid)
        while not result.exists() and proc.poll() is None:
            time.sleep(0.1)
    finally:
        if variant == "quix":
            proc.kill()  # lingering after its result (Quix keeps its SIGINT handler)
            proc.wait(30)
        else:
            stop_worker(proc)
    r = json.loads(result.read_text())
    threads = {tid: (_thread_kind(names.get(tid), comm), cpu - before.get(tid, (comm, 0.0))[1])
               for tid, (comm, cpu) in after.items()}  # fmt: skip
    run = {"variant": variant, "events": n, "result": r, "load": [up0, up1], "flags": flags,
           "threads": threads, "process_cpu_s": process1 - process0}  # fmt: skip
    (out / "run.json").write_text(json.dumps(run, indent=1))
    return run


def stages(out: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """CPU µs per event by stage of one profiled run: each thread kind's /proc CPU divided among
    its samples' stages; a kind without samples (native threads) is a stage of its own."""
    run = json.loads((out / "run.json").read_text())
    quix = run["variant"] == "quix"
    with (out / "profile.txt").open() as f:
        samples = read_samples(f)
    by_kind: dict[str, Counter[str]] = {}
    for s in samples:
        by_kind.setdefault(_sample_kind(s), Counter())[stage_of(s, quix)] += s.count
    cpu: Counter[str] = Counter()
    for kind, seconds in run["threads"].values():
        cpu[kind] += seconds
    gone = run["process_cpu_s"] - sum(cpu.values())  # threads that ended during the run
    if gone > 0.005:
        cpu["native:ended during the run"] += gone
    us: dict[str, float] = {}
    n = run["events"]
    for kind, seconds in cpu.items():
        got = by_kind.get(kind)
        if got:
            total = sum(got.values())
            for stage, count in got.items():
                us[stage] = us.get(stage, 0.0) + seconds * count / total / n * 1e6
        else:
            stage = "fetch (librdkafka threads)" if kind.startswith("native:rdk") else f"no samples ({kind})"
            us[stage] = us.get(stage, 0.0) + seconds / n * 1e6
    return us, run


def _sample_kind(sample: Sample) -> str:
    """The thread kind (``_thread_kind``) of a sample, by its frames: the store's executor thread,
    another Python thread (Faust's consumer thread), or the main thread."""
    files = " ".join(sample.frames)
    if "concurrent/futures/thread.py" in files:
        return "store"
    if "threading.py" in files:
        return "python"
    return "main"


def report(dirs: list[Path]) -> str:
    """Per variant: median (range) CPU µs per event by stage over its runs, and the thread totals."""
    by_variant: dict[str, list[tuple[dict[str, float], dict[str, Any]]]] = {}
    for d in dirs:
        for run_dir in sorted(p.parent for p in d.rglob("run.json")):
            us, run = stages(run_dir)
            by_variant.setdefault(run["variant"], []).append((us, run))
    lines = []
    for variant, runs in sorted(by_variant.items()):
        names = sorted(
            {s for us, _ in runs for s in us}, key=lambda s: -statistics.median(u.get(s, 0) for u, _ in runs)
        )
        lines += [
            f"### {variant}: {len(runs)} profiled run(s)",
            "",
            "| stage | CPU µs per event |",
            "|---|---:|",
        ]
        for s in names:
            if max(u.get(s, 0.0) for u, _ in runs) < 0.05:
                continue
            vals = [u.get(s, 0.0) for u, _ in runs]
            lines.append(f"| {s} | {statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f}) |")
        totals = [sum(u.values()) for u, _ in runs]
        own = [r["result"]["cpu_s"] / r["result"]["events"] * 1e6 for _, r in runs]
        lines.append(f"| **whole process, attach to result** | {statistics.median(totals):.1f} "
                     f"({min(totals):.1f}-{max(totals):.1f}) |")  # fmt: skip
        kinds: Counter[str] = Counter()
        for _, r in runs:
            for kind, s in r["threads"].values():
                kinds[kind] += s / r["events"] * 1e6 / len(runs)
        lines += [
            "",
            "threads (mean µs/event): "
            + ", ".join(f"{k} {v:.1f}" for k, v in kinds.most_common() if v >= 0.1),
            f"own figure first to last event (profiled): {statistics.median(own):.1f} µs/event; "
            f"load {min(r['load'][0] for _, r in runs):.1f}-{max(r['load'][1] for _, r in runs):.1f}",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--variants", nargs="+", default=["c", "c0", "quix"], choices=["c", "c0", "quix"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--py-spy", default="py-spy")
    ap.add_argument("--flags", nargs="*", default=["--gil"], help="more py-spy record flags (default --gil)")
    ap.add_argument("--quix-venv", type=Path, default=QUIX_VENV)
    ap.add_argument("--report", type=Path, nargs="+", help="only print the report of these output dirs")
    args = ap.parse_args()
    if args.report:
        print(report(args.report))
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="peerprof-"))
    python = scratch_venv(args.quix_venv) if "quix" in args.variants else Path()
    print(calibrate(out / "calibration", 200_000), flush=True)
    with LocalStack(out / "stack") as stack:
        assert stack.info is not None
        for i in range(args.runs):
            for v in args.variants:
                run = profile_one(v, stack.info.kafka_bootstrap, args.events, args.keys, out / f"{i}-{v}",
                                  args.py_spy, python, args.flags)  # fmt: skip
                r = run["result"]
                print(
                    f"run {i + 1} {v}: {r['events'] / r['seconds']:,.0f} ev/s, "
                    f"{r['cpu_s'] / r['events'] * 1e6:.1f} us/ev (own figure), "
                    f"load {run['load'][0]:.1f}-{run['load'][1]:.1f}",
                    flush=True,
                )
    print(report([out]))


if __name__ == "__main__":
    main()
