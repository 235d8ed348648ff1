"""What the metrics cost on the hot path: one sink call through ``processor.bounded`` with and
without the latency timer, and a micro-batch size set on plain counters and on counters that
observe it into a histogram.

In process, no Kafka and no store: the sink call is an already-finished coroutine, so the
figures are the overhead alone. Variants interleave, ``--repeat`` times; the median is printed.

    python -m benchmarks.metrics_overhead --calls 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from prometheus_client import Histogram

from framework.metrics.observers import BATCH_BUCKETS, ObservedCounters, _observe_sink
from framework.runtime import processor
from framework.runtime.counters import Counters


async def _noop() -> None:
    return None


async def _calls(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await processor.bounded("bench_sink", 10.0, _noop())
    return (time.perf_counter() - start) / n


def _bounded(n: int, timed: bool) -> float:
    processor.sink_timer = _observe_sink if timed else None
    try:
        return asyncio.run(_calls(n))
    finally:
        processor.sink_timer = None


def _batches(n: int, counters: Counters) -> float:
    start = time.perf_counter()
    for i in range(n):
        counters.batches += 1
        counters.last_batch_size = i & 511
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {k: [] for k in ("bounded", "bounded+timer", "counters", "observed")}
    sizes = Histogram("bench_batch_size", "-", ["runtime"], buckets=BATCH_BUCKETS, registry=None)
    for _ in range(args.repeat):
        runs["bounded"].append(_bounded(args.calls, False))
        runs["bounded+timer"].append(_bounded(args.calls, True))
        runs["counters"].append(_batches(args.calls, Counters()))
        runs["observed"].append(_batches(args.calls, ObservedCounters(sizes.labels("bench").observe)))
    med = {k: statistics.median(v) * 1e6 for k, v in runs.items()}
    for k, v in med.items():
        print(f"{k:>14}: {v:.3f} us per call (range {min(runs[k]) * 1e6:.3f}-{max(runs[k]) * 1e6:.3f})")
    print(f"sink timer overhead: {med['bounded+timer'] - med['bounded']:.3f} us per sink call "
          f"(ratio {med['bounded+timer'] / med['bounded']:.2f})")  # fmt: skip
    print(f"batch-size observation overhead: {med['observed'] - med['counters']:.3f} us per micro-batch")


if __name__ == "__main__":
    main()
