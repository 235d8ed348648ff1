"""Notification overhead on the stream: the keyed runtime with and without notifications, side by side.

The same topic (events over 17 tenants ``orgN``) runs through the keyed
runtime's batch path into the embedded SQLite store, with an injected
latency per store call: writing the data only; writing each micro-batch's
notification entries with it in one apply (``App(notifications=True)``,
blind counts); and the same with one read per batch that tells inserted
from updated (``NotificationConfig(count_inserts=True)``).

    python -m benchmarks.notification_overhead --events 20000 --latency-ms 0 2 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from benchmarks.agent_throughput import faust_variant, make_records
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack

VARIANTS = {"store only": "0", "notifications": "1", "notifications + inserts": "inserts"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {"bench-in": 4}))
        asyncio.run(produce(broker, "bench-in", make_records(args.events, args.keys)))
        print(f"{args.events} events, {args.keys} keys over 17 tenants, 4 partitions, "
              f"{args.repeat} run(s) of each variant, interleaved")  # fmt: skip
        for latency in args.latency_ms:
            runs: dict[str, list[float]] = {name: [] for name in VARIANTS}
            for _ in range(args.repeat):
                for name, mode in VARIANTS.items():
                    env = {"BENCH_NOTIFY": mode}
                    rate = faust_variant(
                        "keyed", broker, "bench-in", args.events, latency, Path(tmp), env=env
                    )
                    runs[name].append(rate)
            base = statistics.median(runs["store only"])
            print(f"-- store latency {latency:g} ms per call")
            for name, out in runs.items():
                median = statistics.median(out)
                print(f"   {name:<22} {median:10.0f} ev/s  {sorted(round(x) for x in out)}"
                      f"   {median / base:5.2f} of store only")  # fmt: skip


if __name__ == "__main__":
    main()
