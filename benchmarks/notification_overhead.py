"""Notification overhead on the stream: the keyed runtime with and without notifications, side by side.

The same topic (events over 17 tenants ``orgN``) runs through the keyed
runtime's batch path into the embedded SQLite store, with an injected
latency per store call: writing the data only; writing each micro-batch's
notification entries with it in one apply (``App(notifications=True)``,
blind counts); and the same with one read per batch that tells inserted
from updated (``NotificationConfig(count_inserts=True)``).

    python -m benchmarks.notification_overhead --events 20000 --latency-ms 0 2 --repeat 3

``--sink-only``: the store sink alone, in process (no Kafka, no runtime), batches of 500
events on the SQLite store: wall and CPU (``process_time``) milliseconds per batch, which
moves less with the machine's load than end-to-end throughput.

    python -m benchmarks.notification_overhead --sink-only --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.agent_throughput import faust_variant
from benchmarks.calibration import make_records
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack

VARIANTS = {"store only": "0", "notifications": "1", "notifications + inserts": "inserts"}


async def _sink_run(mode: str, work: Path, batches: int) -> tuple[float, float]:
    """(wall, CPU) milliseconds per batch of 500 events through one variant's store sink."""
    from benchmarks.bench_apps import BENCH_TABLE
    from framework.core.events import Event
    from framework.core.mutations import Upsert
    from framework.notifications import NOTIFICATION_TABLES, NotificationConfig
    from framework.notifications.sink import NotificationSink
    from framework.runtime.sinks import WideColumnSink
    from stores.sqlite import SqliteStore

    store = await SqliteStore.open(work / f"{mode}-{time.monotonic_ns()}.db")
    for schema in (BENCH_TABLE, *NOTIFICATION_TABLES):
        await store.ensure_table(schema)
    config = NotificationConfig(
        tenant_of=lambda t, k: str(k["k"]).split(":")[0], count_inserts=mode == "inserts"
    )
    sink = WideColumnSink(store) if mode == "0" else NotificationSink(store, "bench", config, prefix="bench")
    data = [
        [(Event(f"e{b}-{i}", f"org{i % 17}:e{i}", 1, 1, "bench", {}),
          [Upsert("bench", {"k": f"org{i % 17}:e{(b * 500 + i) % 1000}"}, {"n": i, "body": "x" * 120},
                  1_700_000_000_000_000 + b * 500 + i)]) for i in range(500)]
        for b in range(batches)
    ]  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in data:
        await sink.write_batch(batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await store.close()
    return wall / batches * 1000, cpu / batches * 1000


def sink_only(repeat: int, batches: int = 40) -> None:
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            for name, mode in VARIANTS.items():
                runs[name].append(asyncio.run(_sink_run(mode, Path(tmp), batches)))
    print(f"store sink alone, {batches} batches of 500 events over 17 tenants, {repeat} run(s), medians")
    base = statistics.median(c for _, c in runs["store only"])
    for name, out in runs.items():
        wall, cpu = statistics.median(w for w, _ in out), statistics.median(c for _, c in out)
        print(f"   {name:<24} wall {wall:6.1f} ms/batch   CPU {cpu:6.1f} ms/batch   "
              f"CPU +{(cpu - base) / 500 * 1000:5.1f} us/event")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--sink-only", action="store_true", help="the store sink alone, in process")
    args = ap.parse_args()
    if args.sink_only:
        sink_only(args.repeat)
        return
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
