"""What the change verifier costs in a worker, and how soon it verifies a write (issues 28, 46).

    python -m benchmarks.verify_cost --events 100000 --runs 5 --settle 10 [--app platform|desk|both]

First the calibration line (``benchmarks.calibration.calibrate``). Then, for each example app
(``--app``, default both: the activity platform, the demo's, and the support desk, its history
cut to ``--events`` events), alternately one worker without the verifier (``plain``: the setting
``CONVERGE_VERIFY_RECORD=0``, so its projectors record nothing either) and one with it
(``verify``: ``CONVERGE_VERIFY=<settle>s``, the projectors recording what they write, the
sample at ``--sample``, default the setting's default; with ``--split`` also one recording
without the verifier, ``record``, for the records' share), each on a fresh noida-db and SQLite
store, the same generated history, its web server on. The worker's CPU seconds (user +
system, ``/proc``) are read from the first produced event until ``settle`` + 5 s after the
group drained and then until the verifier is caught up (its ``behind`` 0: every settled change
verified) and its count of verified documents has not moved for 3 s
(the plain worker waits as long as the verify run before it did, its metrics read as often, so
both windows hold the same idle time and scrapes). So the extra CPU of a pair is everything
verification costs the worker: the projectors' records and the verifier. Per pair: the worker's
CPU per event without it; the extra CPU with it, per document the verifier compared and as a
share of the plain worker's CPU; from the verifier's metrics, the seconds from a change's
ingestion to its verification (p50, p99 over every verified document, estimated from the
histogram's buckets; ``settle`` is its floor by design) and the divergences it found (0 on a
correct run). Medians and ranges over the pairs. Figures in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.calibration import calibrate
from benchmarks.proc_cpu import cpu_seconds
from examples.activity_platform.app import app as platform_app
from examples.activity_platform.generator import generate_history as platform_history
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from framework import App
from framework.core.events import Event
from framework.kafka_admin import ensure_topics, produce, wait_all_drained, wait_group_settled
from framework.local_stack import LocalStack, free_port
from framework.metrics.summary import VerifySummary, fetch_metrics, summarize_verify
from framework.worker.processes import start_worker, stop_workers

PARTITIONS = 4
CHUNK = 10_000  # records per produce call, as the demo
#: Each app: its worker spec, app and history (``(seed, events)``: about that many events).
APPS: dict[str, tuple[str, App, Callable[[int, int], list[Event]]]] = {
    "platform": ("examples.activity_platform.app:app", platform_app,
                 lambda seed, n: list(platform_history(seed, n).events)),
    "desk": ("examples.support_desk.app:app", desk_app,
             lambda seed, n: list(desk_history(seed, n // 9 + 1).events)[:n]),
}  # fmt: skip


def _encoded(app: App, events: Sequence[Event]) -> dict[str, list[tuple[bytes, bytes]]]:
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for e in events:
        out.setdefault(app.topic_of(e), []).append((e.ordering_key.encode(), e.to_json()))
    return out


def _env(work: Path, stack: LocalStack, app: App) -> dict[str, str]:
    assert stack.info is not None
    return {"CONVERGE_WIDE_STORE": f"sqlite:///{work / 'wide.db'}", "CONVERGE_ES_URL": stack.info.es_url,
            "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": app.name,
            "CONVERGE_PARTITIONS": str(PARTITIONS), "CONVERGE_DENYLIST_STORE": "target"}  # fmt: skip


@dataclass
class Run:
    variant: str
    events: int
    cpu: float = 0.0  # the worker's CPU seconds over the window
    window: float = 0.0  # seconds, first produced event to the window's end
    verify: VerifySummary | None = None
    load: float = 0.0
    after: float = 0.0  # seconds from the drain to the window's end


def one_run(name: str, variant: str, encoded: dict[str, list[tuple[bytes, bytes]]], events: int,
            settle: float, sample: float | None, idle: float | None, work: Path) -> Run:  # fmt: skip
    """One worker of app ``name`` on a fresh stack; ``idle``: the plain run's window end after the
    drain."""
    spec, app, _ = APPS[name]
    run = Run(variant, events)
    with LocalStack(work / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        topics = tuple(app.topics())
        asyncio.run(ensure_topics(broker, dict.fromkeys(topics, PARTITIONS)))
        port = free_port()  # both serve /metrics, scraped alike after the drain
        env = _env(work, stack, app) | {"CONVERGE_WEB_PORT": str(port)}
        if variant == "verify":
            env["CONVERGE_VERIFY"] = f"{settle}s"
            if sample is not None:
                env["CONVERGE_VERIFY_SAMPLE"] = str(sample)
        elif variant == "plain":
            env["CONVERGE_VERIFY_RECORD"] = "0"
        (proc,) = procs = [start_worker(spec, work / "w0", broker, env)]
        try:
            asyncio.run(wait_group_settled(broker, app.name, 1, 120))
            before, load0, t0 = cpu_seconds(proc.pid), os.getloadavg()[0], time.perf_counter()
            for topic, records in encoded.items():
                for i in range(0, len(records), CHUNK):
                    asyncio.run(produce(broker, topic, records[i : i + CHUNK]))
            if not asyncio.run(wait_all_drained(broker, app.name, topics, 900, poll=0.2)):
                raise RuntimeError(f"{variant}: not drained in 900 s; logs in {work}")
            drained = time.perf_counter()
            url = f"http://127.0.0.1:{port}"
            if variant == "verify":
                run.verify = _verified(url, drained + settle + 5)
            else:
                while time.perf_counter() - drained < (idle or 0.0):
                    fetch_metrics(url)
                    time.sleep(1.0)
            run.window = time.perf_counter() - t0
            run.cpu = cpu_seconds(proc.pid) - before
            run.load = max(load0, os.getloadavg()[0])
            run.after = time.perf_counter() - drained
        finally:
            codes = stop_workers(procs)
        if any(codes):
            raise RuntimeError(f"worker exit codes {codes}; logs in {work}")
    return run


def _verified(url: str, not_before: float, limit: float = 900.0) -> VerifySummary:
    """Poll the worker's metrics until ``not_before`` has passed, the verifier is caught up
    (every settled change verified: ``behind`` 0) and its verified count has not moved for 3 s
    (at most ``limit`` seconds more); the last summary."""
    last, still, summary = -1, 0, None
    give_up = not_before + limit
    while True:
        summary = summarize_verify(fetch_metrics(url))
        count = -1 if summary is None else summary.documents
        still = still + 1 if count == last else 0
        last = count
        now = time.perf_counter()
        caught_up = summary is not None and summary.behind_s == 0
        if summary is not None and now >= not_before and ((caught_up and still >= 3) or now >= give_up):
            return summary
        time.sleep(1.0)


def _spread(values: Sequence[float], fmt: str) -> str:
    med = statistics.median(values)
    return f"{format(med, fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def pairs_of(name: str, args: argparse.Namespace, root: Path) -> list[tuple[Run, Run]]:
    """``args.runs`` interleaved pairs (verify, then plain) of app ``name``, each printed."""
    events = APPS[name][2](args.seed, args.events)
    encoded = _encoded(APPS[name][1], events)
    n = len(events)
    pairs: list[tuple[Run, Run]] = []
    for i in range(args.runs):
        v = one_run(name, "verify", encoded, n, args.settle, args.sample, None, root / f"{name}-verify-{i}")
        p = one_run(name, "plain", encoded, n, args.settle, None, v.after, root / f"{name}-plain-{i}")
        assert v.verify is not None
        if args.split:  # the projectors' records alone: their share of the extra CPU
            r = one_run(name, "record", encoded, n, args.settle, None, v.after, root / f"{name}-record-{i}")
            print(
                f"{name} pair {i + 1}: records alone {r.cpu / n * 1e6:.0f} µs/event, "
                f"{(r.cpu - p.cpu) / p.cpu:.1%} of the worker's CPU; load {r.load:.2f}",
                flush=True,
            )
        extra = v.cpu - p.cpu
        print(f"{name} pair {i + 1}: plain {p.cpu / n * 1e6:.0f} µs/event ({p.window:.1f} s), verify "
              f"{v.cpu / n * 1e6:.0f} µs/event ({v.window:.1f} s); {v.verify.documents:,} documents "
              f"verified, extra {extra / max(1, v.verify.documents) * 1e6:.0f} µs/document = "
              f"{extra / p.cpu:.1%} of the worker's CPU; write to verification p50 "
              f"{v.verify.lag_p50_s} s, p99 {v.verify.lag_p99_s} s; divergences "
              f"{sum(v.verify.divergent.values())}; load {max(p.load, v.load):.2f}",
              flush=True)  # fmt: skip
        pairs.append((p, v))
    return pairs


def summary(name: str, n: int, pairs: list[tuple[Run, Run]], settle: float) -> None:
    """The medians (ranges) of ``pairs``."""
    plain = [p.cpu / n * 1e6 for p, _ in pairs]
    share = [(v.cpu - p.cpu) / p.cpu for p, v in pairs]
    per_doc = [(v.cpu - p.cpu) / max(1, (v.verify.documents if v.verify else 1)) * 1e6 for p, v in pairs]
    p50 = [v.verify.lag_p50_s or 0.0 for _, v in pairs if v.verify]
    p99 = [v.verify.lag_p99_s or 0.0 for _, v in pairs if v.verify]
    divergent = [sum(v.verify.divergent.values()) for _, v in pairs if v.verify]
    print(f"\n{name}: {n:,} events, {len(pairs)} pairs, settle {settle:g} s; medians (ranges)")
    print(f"worker without the verifier: {_spread(plain, '.0f')} µs/event")
    print(f"the verifier's extra CPU: {_spread(per_doc, '.1f')} µs per verified document, "
          f"{_spread([s * 100 for s in share], '.1f')} % of the worker's CPU")  # fmt: skip
    print(f"write to verification: p50 {_spread(p50, '.1f')} s, p99 {_spread(p99, '.1f')} s; "
          f"divergences {divergent}")  # fmt: skip


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs (verify, plain)")
    parser.add_argument("--settle", type=float, default=10.0, help="the verifier's settle time, seconds")
    parser.add_argument("--sample", type=float, default=None, help="verify_sample (default: the setting's)")
    parser.add_argument("--app", choices=[*sorted(APPS), "both"], default="both")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--split", action="store_true", help="also a worker recording without the verifier")
    args = parser.parse_args()
    names = sorted(APPS, reverse=True) if args.app == "both" else [args.app]
    results: dict[str, tuple[int, list[tuple[Run, Run]]]] = {}
    with tempfile.TemporaryDirectory(prefix="converge-verify-cost-") as tmp:
        root = Path(tmp)
        print(calibrate(root / "calibration", 200_000), flush=True)
        for name in names:
            pairs = pairs_of(name, args, root)
            results[name] = (pairs[0][0].events, pairs)
    for name, (n, pairs) in results.items():
        summary(name, n, pairs, args.settle)


if __name__ == "__main__":
    main()
