"""Exact-duplicate skipping on a stream with 10 % redelivered events, side by side.

The keyed runtime (SQLite store, injected latency per store call) runs the same
topic twice: writing every delivery, and skipping exact duplicates through the
local rocksdict filter (``RuntimeConfig.dedupe``). A tenth of the events are
delivered again later in the stream, byte for byte (as a producer retry or a
redelivery after a crash brings them).

    python -m benchmarks.dedupe --events 20000 --duplicates 0.1 --latency-ms 0 2 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from pathlib import Path

from benchmarks.agent_throughput import faust_variant
from benchmarks.calibration import make_records
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack


def with_duplicates(
    records: list[tuple[bytes, bytes]], share: float, seed: int = 7
) -> list[tuple[bytes, bytes]]:
    """``records`` plus ``share`` of them again, each re-inserted somewhere after its original."""
    rng = random.Random(seed)
    out = list(records)
    for i in rng.sample(range(len(records)), int(len(records) * share)):
        out.insert(rng.randint(i + 1, len(out)), records[i])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--duplicates", type=float, default=0.1)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    records = with_duplicates(make_records(args.events, args.keys), args.duplicates)
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        asyncio.run(ensure_topics(broker, {"bench-in": 4}))
        asyncio.run(produce(broker, "bench-in", records))
        extra = len(records) - args.events
        print(f"{len(records)} deliveries ({args.events} events + {extra} exact duplicates), "
              f"{args.keys} keys, 4 partitions, {args.repeat} run(s) each")  # fmt: skip
        for latency in args.latency_ms:
            runs: dict[str, list[float]] = {"write all": [], "skip duplicates": []}
            for _ in range(args.repeat):
                for name, out in runs.items():
                    extra = {"BENCH_DEDUPE": "1" if name == "skip duplicates" else "0"}
                    out.append(
                        faust_variant(
                            "keyed", broker, "bench-in", len(records), latency, Path(tmp), env=extra
                        )
                    )
            a, b = (statistics.median(runs[k]) for k in ("write all", "skip duplicates"))
            print(f"-- store latency {latency:g} ms per call")
            for label, name, median in (
                ("write every delivery ", "write all", a),
                ("skip exact duplicates", "skip duplicates", b),
            ):
                print(f"   {label}  {median:10.0f} deliveries/s  {sorted(round(x) for x in runs[name])}")
            print(f"   skip/write = {b / a:.2f} (medians)")


if __name__ == "__main__":
    main()
