"""One keyed worker over a long run: throughput and the worker's resident memory sampled as it goes.

    python -m benchmarks.soak --events 1000000 --keys 100000

The benchmark app's keyed variant (``benchmarks/bench_apps.py``: the runtime,
the batch path and the SQLite store) consumes a topic of ``--events`` events
produced up front. Every ``--every`` seconds the worker's RSS (``/proc/PID/status``)
and the events done so far are printed; at the end, the RSS sampled between 10 %
and 90 % of the events (after warm-up, before the consumer's buffers empty) is
summarised as min / max and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.calibration import make_records
from benchmarks.proc_cpu import rss_mib
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        topic, group = "soak-in", f"soak-{uuid.uuid4().hex[:6]}"
        asyncio.run(ensure_topics(broker, {topic: 4}))
        for start in range(0, args.events, 100_000):
            chunk = make_records(min(100_000, args.events - start), args.keys)
            asyncio.run(produce(broker, topic, chunk))
        data = Path(tmp) / group
        env = {"BENCH_VARIANT": "keyed", "BENCH_GROUP": group, "BENCH_TOPIC": topic,
               "BENCH_EVENTS": str(args.events), "BENCH_LATENCY_MS": "0", "BENCH_NOOP_SINK": "0",
               "BENCH_PROGRESS": str(data / "progress.txt")}  # fmt: skip
        proc = start_worker("benchmarks.bench_apps:build", data, broker, env)
        started, samples = time.perf_counter(), []
        try:
            while not (data / "bench-result.json").exists():
                if proc.poll() is not None:
                    raise RuntimeError((data / "worker.log").read_text()[-3000:])
                time.sleep(args.every)
                done = (
                    int((data / "progress.txt").read_text() or 0) if (data / "progress.txt").exists() else 0
                )
                rss = rss_mib(proc.pid)
                if 0.1 * args.events <= done <= 0.9 * args.events:
                    samples.append(rss)  # the steady middle of the run
                elapsed = time.perf_counter() - started
                print(f"{elapsed:7.1f} s  {done:>9,} events  RSS {rss:7.1f} MiB", flush=True)
        finally:
            stop_worker(proc)
        result = json.loads((data / "bench-result.json").read_text())
        warm = samples or [0.0]
        n, seconds = result["events"], result["seconds"]
        print(f"{n:,} events in {seconds:.1f} s = {n / seconds:,.0f} ev/s")
        low, high = min(warm), max(warm)
        print(f"RSS from 10 % to 90 % of the events: min {low:.1f} MiB, max {high:.1f} MiB, "
              f"max/min {high / low if low else 0:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
