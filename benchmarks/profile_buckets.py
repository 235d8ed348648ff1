"""Attributes a py-spy profile of a converge worker to the parts of its per-event path.

    python -m benchmarks.profile_buckets /tmp/prof/worker.txt --run /tmp/prof/run.json

Reads py-spy's raw (collapsed) output, one ``frame;frame;...;leaf count`` line per stack, root
first, each frame ``function (file:line)``. Every sample goes to its thread (by its root frames)
and to one bucket by ``RULES`` (the first rule any of its frames matches), except the samples
``idle`` recognises and the event loop's own frames (a leaf in the loop's run call: uvloop's C
code, which includes its polling). The part of the path only the leaf-most framework frame can
tell (Faust's and aiokafka's machinery, or the runtime's batching and keys) decides the rest.

With ``--run`` (``benchmarks.profile_demo``'s ``run.json``) each thread's CPU seconds, read from
/proc over the same interval, are divided among the buckets by that thread's samples, and
printed per source message in microseconds; ``--runs DIR...`` (profile_demo's output
directories) prints the medians and ranges over several runs. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Sample", "read_samples", "thread_of", "idle", "bucket_of", "RULES", "Profile", "bucket_seconds",
    "report", "report_runs", "main",
]  # fmt: skip

#: ``function (file:line)``: py-spy's frame.
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^():]*)(?::\d+)?\)$")


@dataclass(frozen=True)
class Sample:
    """One stack (root first) and how many times it was sampled."""

    frames: tuple[str, ...]
    count: int

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(_file(f) for f in self.frames)


def _file(frame: str) -> str:
    m = _FRAME.match(frame)
    return m.group("file") if m else frame


def _function(frame: str) -> str:
    m = _FRAME.match(frame)
    return f"{m.group('fn')} ({m.group('file')})" if m else frame


def read_samples(lines: Iterable[str]) -> list[Sample]:
    """The samples of a raw py-spy file; ValueError naming the first line that is not one."""
    out = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"line {n}: not 'frame;frame;... count': {line[:80]!r}")
        out.append(Sample(tuple(stack.split(";")), int(count)))
    return out


def thread_of(sample: Sample) -> str:
    """``store`` (the SQLite store's executor thread), ``consumer`` (a mode ``ServiceThread``:
    Faust's consumer thread), ``other`` (another Python thread) or ``main``."""
    files = sample.files
    if "concurrent/futures/thread.py" in files:
        return "store"
    if "mode/threads.py" in files:
        return "consumer"
    if "threading.py" in files:
        return "other"
    return "main"


#: Leaf frames that wait: an executor thread waiting for work, a thread waiting on a condition.
_IDLE_LEAVES = ("_worker (concurrent/futures/thread.py)", "Condition.wait (threading.py)",
                "Event.wait (threading.py)", "Thread.join (threading.py)")  # fmt: skip
#: Leaf frames in the event loop's run call (uvloop's C code: its I/O and its polling).
_LOOP_LEAVES = (
    "Worker.execute_from_commandline (mode/worker.py)",
    "ServiceThread._start_thread (mode/threads.py)",
)


def idle(sample: Sample) -> str | None:
    """``idle``, or ``event loop (uvloop C: I/O and polling)`` for a leaf in the loop's run call;
    None for any other sample."""
    leaf = _function(sample.frames[-1])
    if leaf in _IDLE_LEAVES:
        return "idle"
    if leaf in _LOOP_LEAVES:
        return "event loop (uvloop C: I/O and polling)"
    return None


#: Ordered: a sample goes to the first bucket whose patterns match one of its frames (a pattern
#: is a file prefix, or ``function (file`` for one function). Store-thread samples go by
#: ``_STORE_RULES`` instead; a sample no rule claims goes by its leaf-most framework frame.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging and metrics", (
        "logging/", "framework/metrics/", "framework/runtime/counters.py", "faust/sensors/",
        "prometheus_client/",
    )),
    ("index bulk (Elasticsearch client)", (
        "stores/elasticsearch/", "elasticsearch/", "elastic_transport/", "aiohttp/",
    )),
    ("aggregates: totals", ("framework/aggregates/totals.py",)),
    ("aggregates: contributions", (
        "framework/aggregates/", "framework/core/aggregate.py", "examples/activity_platform/aggregates.py",
    )),
    ("change feed: parse records (projector side)", (
        "ProjectionProcessor.prepare (", "ProjectionProcessor._keys (", "ProjectionProcessor.map_batch (",
    )),
    ("projector (read, build, skip)", (
        "framework/runtime/projector.py", "framework/runtime/written.py", "agents/projection.py",
    )),
    ("change feed: build and produce records", (
        "framework/runtime/change_feed.py", "wire.<locals>.announce (framework", "aiokafka/producer/",
        "faust/transport/producer.py", "Topic.send (faust", "Topic.publish_message (faust",
        "App.maybe_start_producer (faust",
    )),
    ("notification entries", ("framework/notifications/entries.py",)),
    ("store apply (event-loop side)", (
        "stores/sqlite/", "framework/notifications/sink.py", "framework/runtime/sinks.py",
    )),
    ("duplicate filter", ("framework/runtime/dedupe.py", "rocksdict")),
    ("acknowledgement and commit", (
        "KeyedScheduler.finish (", "KeyedScheduler._finish (", "framework/runtime/offsets.py",
        "Consumer.commit", "Consumer._commit", "Consumer.ack (", "Event.ack (faust",
        "aiokafka/consumer/group_coordinator.py",
    )),
    ("parse and map", (
        "framework/runtime/mapping.py", "framework/core/events.py", "parse_work (",
        "AgentProcessor.map_batch (", "AgentProcessor.prepare (", "agents/", "examples/",
        "framework/erasure/", "framework/idmutation/", "framework/core/",
    )),
)  # fmt: skip

_STORE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("store thread: apply (writes, commit)", ("SqliteEngine.apply (", "SqliteStore._flush_group (")),
    ("store thread: reads", ("SqliteEngine.read_", "SqliteEngine.scan")),
)

#: Files of the transport: Faust, aiokafka, mode, and the runtime's fetch pacing around aiokafka.
_TRANSPORT = ("faust/", "aiokafka/", "mode/", "framework/runtime/fetch_pacing.py")
#: The transport's parts, the first whose patterns match a frame of the sample.
_FAUST_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Faust: event and message objects", (
        "App.create_event (", "faust/events.py", "faust/types/tuples.py", "Consumer._to_message (",
    )),
    ("Faust: decode (schema, serializers)", ("faust/serializers/", "Conductor.")),
    ("aiokafka: fetch, records, protocol", ("aiokafka/", "framework/runtime/fetch_pacing.py")),
    ("Faust: fetch loop (drain, getmany, wait_first)", (
        "Consumer._drain_messages (", "Consumer.getmany (", "Fetcher._fetcher (",
    )),
    ("Faust: stream, channels, take", ("faust/streams.py", "faust/channels.py", "mode/utils/queues.py")),
)  # fmt: skip
_FAUST = "Faust: other"
_RUNTIME = "runtime: batches, keys, scheduling"
_LOOP = "asyncio callbacks, futures, tasks"
_STORE_OTHER = "store thread: other"
_LOOP_ROOTS = ("mode/worker.py", "mode/threads.py")


def _matches(frame: str, patterns: tuple[str, ...]) -> bool:
    fn = _function(frame)
    file = _file(frame)
    return any(file.startswith(p) or fn.startswith(p) for p in patterns)


def bucket_of(sample: Sample) -> str:
    """The bucket of a non-idle sample (see ``RULES``)."""
    rules = _STORE_RULES if thread_of(sample) == "store" else RULES
    for name, patterns in rules:
        if any(_matches(f, patterns) for f in sample.frames):
            return name
    if rules is _STORE_RULES:
        return _STORE_OTHER
    for frame in reversed(sample.frames):
        file = _file(frame)
        if file.startswith((*_LOOP_ROOTS, "framework/cli", "framework/worker/")):
            break  # the loop's run call and what started it: not the path of a message
        if file.startswith(_TRANSPORT):
            for name, patterns in _FAUST_PARTS:
                if any(_matches(f, patterns) for f in sample.frames):
                    return name
            return _FAUST
        if file.startswith("framework/"):
            return _RUNTIME
    return _LOOP


@dataclass
class Profile:
    """Samples by (thread, bucket), the idle ones apart, and self time by function."""

    buckets: Counter[tuple[str, str]]
    excluded: Counter[tuple[str, str]]
    self_time: Counter[str]

    @classmethod
    def of(cls, samples: Iterable[Sample], gil: bool = False) -> Profile:
        """``gil``: the samples of ``py-spy --gil`` (each holds the GIL), so a leaf in the event
        loop's run call is uvloop's C code at work, a bucket, not a wait."""
        p = cls(Counter(), Counter(), Counter())
        for s in samples:
            thread, why = thread_of(s), idle(s)
            if why is not None and gil and why != "idle":
                p.buckets[(thread, why)] += s.count
                p.self_time[_function(s.frames[-1])] += s.count
                continue
            if why is not None:
                p.excluded[(thread, why)] += s.count
                continue
            p.buckets[(thread, bucket_of(s))] += s.count
            p.self_time[_function(s.frames[-1])] += s.count
        return p


def _thread_cpu(run: dict[str, object]) -> dict[str, float]:
    """CPU seconds of each thread class over the run: ``MainThread`` is main, a thread named
    ``converge-sqlite*`` the store's, another thread with a Python name (Faust's consumer thread,
    ``Thread-1``; ``uvloop_0``) consumer, and threads without one (native helper threads, which
    py-spy does not sample) apart as ``native``."""
    names: dict[str, str] = run.get("thread_names", {})  # type: ignore[assignment]
    threads: dict[str, dict[str, float]] = run.get("threads", {})  # type: ignore[assignment]
    if not threads:  # a run without per-thread readings: the process as one thread
        return {"process": float(run["worker_cpu_s"])}  # type: ignore[arg-type]
    out: dict[str, float] = {}
    for tid, got in threads.items():
        name = names.get(tid)
        if name is None:
            kind = "native"
        elif name == "MainThread":
            kind = "main"
        elif name.startswith("converge-sqlite"):
            kind = "store"
        else:
            kind = "consumer"
        out[kind] = out.get(kind, 0.0) + got["cpu"]
    return out


def bucket_seconds(profile: Profile, cpu: dict[str, float]) -> dict[str, float]:
    """CPU seconds per bucket: each thread's ``cpu`` divided among its buckets by its samples
    (``cpu`` with only ``process``: the whole process's, by all samples)."""
    total = sum(profile.buckets.values())
    by_thread: Counter[str] = Counter()
    for (thread, _), n in profile.buckets.items():
        by_thread[thread] += n
    out: dict[str, float] = {}
    for (thread, name), n in profile.buckets.items():
        share = (
            cpu["process"] * n / total if "process" in cpu else cpu.get(thread, 0.0) * n / by_thread[thread]
        )
        out[name] = out.get(name, 0.0) + share
    return out


def report(profile: Profile, run: dict[str, object] | None, top: int = 15) -> str:
    """The buckets as a Markdown table, the per-thread totals, the excluded samples and the top
    functions by self time. Without ``run``: each bucket's share of the attributed samples.
    With it: each bucket's CPU µs per source message (every thread's /proc CPU divided among
    its buckets by its samples) and its share of the attributed CPU, largest first."""
    total = sum(profile.buckets.values())
    if total == 0:
        raise ValueError("no attributed samples: is this a py-spy raw file of a running worker?")
    by_bucket: Counter[str] = Counter()
    by_thread: Counter[str] = Counter()
    for (thread, name), n in profile.buckets.items():
        by_bucket[name] += n
        by_thread[thread] += n
    cpu = _thread_cpu(run) if run else {}
    messages = float(run["source_messages"]) if run else 0.0  # type: ignore[arg-type]
    seconds: dict[str, float] = {}
    for name, n in by_bucket.items():
        if "process" in cpu:
            seconds[name] = cpu["process"] * n / total
        else:
            seconds[name] = sum(
                cpu.get(t, 0.0) * profile.buckets[(t, name)] / by_thread[t] for t in by_thread
            )
    attributed = sum(seconds.values())
    lines = []
    if run:
        lines += ["| bucket | CPU µs per event | share of CPU | share of samples |", "|---|---:|---:|---:|"]
        for name in sorted(by_bucket, key=lambda b: -seconds[b]):
            us, share = seconds[name] / messages * 1e6, 100 * seconds[name] / attributed
            lines.append(f"| {name} | {us:.0f} | {share:.1f} % | {100 * by_bucket[name] / total:.1f} % |")
    else:
        lines += ["| bucket | share of samples |", "|---|---:|"]
        lines += [f"| {name} | {100 * n / total:.1f} % |" for name, n in by_bucket.most_common()]
    lines += ["", f"{total} attributed samples; by thread: "
              + ", ".join(f"{t} {100 * n / total:.1f} %" for t, n in by_thread.most_common())]  # fmt: skip
    if run:
        per = ", ".join(f"{t} {s:.1f} s ({s / messages * 1e6:.0f} µs/event)" for t, s in sorted(cpu.items()))
        lines.append(f"thread CPU from /proc: {per}; attributed {attributed / messages * 1e6:.0f} µs/event")
        unprofiled = sum(s for t, s in cpu.items() if t not in by_thread and t != "process")
        if unprofiled:
            lines.append(f"(CPU of threads without samples, in no bucket: {unprofiled:.2f} s)")
    excluded = ", ".join(f"{t}/{why} {n}" for (t, why), n in profile.excluded.most_common())
    lines += [f"excluded samples (thread/why count): {excluded or 'none'}", ""]
    lines += ["| function (self) | share of samples |", "|---|---:|"]
    lines += [f"| `{fn}` | {100 * n / total:.1f} % |" for fn, n in profile.self_time.most_common(top)]
    return "\n".join(lines)


def _load(directory: Path, gil: bool) -> tuple[Profile, dict[str, Any]]:
    run: dict[str, Any] = {**json.loads((directory / "run.json").read_text()), "out": directory.name}
    with (directory / "worker.txt").open() as f:
        return Profile.of(read_samples(f), gil or "--gil" in run.get("flags", [])), run


def _spread(values: list[float], fmt: str = "{:.0f}") -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}–{fmt.format(high)})" if len(values) > 1 else fmt.format(mid)


def report_runs(runs: list[tuple[Profile, dict[str, Any]]]) -> str:
    """Several runs of ``benchmarks.profile_demo``: per bucket the median CPU µs per event and
    share of the attributed CPU, with their ranges; then each run's totals."""
    per_run = []
    for profile, run in runs:
        seconds = bucket_seconds(profile, _thread_cpu(run))
        attributed = sum(seconds.values())
        n = float(run["source_messages"])
        per_run.append({b: (s / n * 1e6, 100 * s / attributed) for b, s in seconds.items()})
    names = sorted(
        {b for r in per_run for b in r},
        key=lambda b: -statistics.median(r.get(b, (0, 0))[0] for r in per_run),
    )
    lines = [
        f"| bucket | CPU µs per event, median (range) of {len(runs)} | share of CPU |",
        "|---|---:|---:|",
    ]
    for b in names:
        us = [r.get(b, (0.0, 0.0))[0] for r in per_run]
        share = [r.get(b, (0.0, 0.0))[1] for r in per_run]
        lines.append(f"| {b} | {_spread(us)} | {_spread(share, '{:.1f}')} % |")
    lines += ["", "| run | events/s | worker CPU µs/event | broker CPU µs/event | broker threads, CPU s "
              "| samples | load before → after |", "|---|---:|---:|---:|---|---:|---|"]  # fmt: skip
    for profile, run in runs:
        n = float(run["source_messages"])
        load = " → ".join(
            str(run[k]).split("load average: ")[-1].split(",")[0] for k in ("uptime_before", "uptime_after")
        )
        broker = sorted(run.get("broker_threads", {}).items(), key=lambda kv: -kv[1])
        threads = ", ".join(f"{k} {v:.1f}" for k, v in broker if v >= 0.05) or "–"
        lines.append(
            f"| {run.get('out', '?')} | {n / run['seconds']:,.0f} | {run['worker_cpu_s'] / n * 1e6:.0f} "
            f"| {run['broker_cpu_s'] / n * 1e6:.0f} | {threads} | {sum(profile.buckets.values())} | {load} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", type=Path, nargs="?", help="py-spy record --format raw output")
    ap.add_argument("--runs", type=Path, nargs="+", help="profile_demo output dirs: medians over them")
    ap.add_argument("--run", type=Path, help="run.json of benchmarks.profile_demo (CPU per event)")
    ap.add_argument("--top", type=int, default=15, help="functions listed by self time")
    ap.add_argument("--gil", action="store_true", help="recorded with py-spy --gil (implied by run.json)")
    args = ap.parse_args()
    if args.runs:
        print(report_runs([_load(d, args.gil) for d in args.runs]))
        return
    if args.raw is None:
        ap.error("give a raw file or --runs")
    one: dict[str, Any] | None = json.loads(args.run.read_text()) if args.run else None
    gil = args.gil or (one is not None and "--gil" in one.get("flags", []))
    with args.raw.open() as f:
        print(report(Profile.of(read_samples(f), gil), one, args.top))


if __name__ == "__main__":
    main()
