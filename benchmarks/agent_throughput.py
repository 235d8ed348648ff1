"""Agent throughput, side by side on the same events and sink.

(a) raw aiokafka consume + JSON decode; (b1) a plain Faust agent, no writes;
(b2) a naive Faust agent awaiting each store write in turn; (c) the
KeyedAgent runtime; (c0) the runtime with a no-op sink, to separate its own
cost from the store's. The sink is the embedded SQLite store with an injected
latency per write (0 ms and 2 ms by default).

    python -m benchmarks.agent_throughput --events 20000 --keys 1000 --latency-ms 0 2 --repeat 3

With ``--repeat N`` every variant runs N times, interleaved, and the median is
printed (with the range): single runs on 2 shared cores vary by 30 % or more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker


def make_records(n: int, keys: int) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(n):
        k = f"org{i % 17}:e{i % keys}"
        body = {"event_id": f"ev{i}", "ordering_key": k, "version": 1_700_000_000_000_000 + i,
                "occurred_at": 1_700_000_000_000_000 + i, "type": "bench",
                "payload": {"n": i, "body": "x" * 120}}  # fmt: skip
        out.append((k.encode(), json.dumps(body).encode()))
    return out


async def raw_consume(bootstrap: str, topic: str, n: int) -> float:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"raw-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    await consumer.start()
    try:
        seen, first = 0, 0.0
        while seen < n:
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batches.values():
                if seen == 0 and records:
                    first = time.perf_counter()
                for r in records:
                    json.loads(r.value)
                seen += len(records)
        return n / (time.perf_counter() - first)
    finally:
        await consumer.stop()


def faust_variant(
    variant: str,
    broker: str,
    topic: str,
    n: int,
    latency_ms: float,
    work: Path,
    noop: bool = False,
    env: dict[str, str] | None = None,
) -> float:
    group = f"bench-{variant}-{uuid.uuid4().hex[:6]}"
    data = work / group
    env = {"BENCH_VARIANT": variant, "BENCH_GROUP": group, "BENCH_TOPIC": topic,
           "BENCH_EVENTS": str(n), "BENCH_LATENCY_MS": str(latency_ms),
           "BENCH_NOOP_SINK": "1" if noop else "0", **(env or {})}  # fmt: skip
    proc = start_worker("benchmarks.bench_apps:build", data, broker, env)
    result = data / "bench-result.json"
    deadline = time.monotonic() + 900
    try:
        while not result.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (data / "worker.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{variant} worker failed:\n{tail}")
            time.sleep(0.2)
    finally:
        stop_worker(proc)
    r = json.loads(result.read_text())
    return r["events"] / r["seconds"]


def _median(runs: list[float]) -> str:
    if len(runs) == 1:
        return f"{runs[0]:10.0f} ev/s"
    return f"{statistics.median(runs):10.0f} ev/s  ({min(runs):.0f}-{max(runs):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant; the median is printed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        topic = "bench-in"
        asyncio.run(ensure_topics(broker, {topic: 4}))
        asyncio.run(produce(broker, topic, make_records(args.events, args.keys)))
        print(f"{args.events} events over {args.keys} keys, 4 partitions, one worker per variant, "
              f"{args.repeat} run(s) each")  # fmt: skip
        raw = asyncio.run(raw_consume(stack.info.kafka_bootstrap, topic, args.events))
        print(f"(a)  raw aiokafka + JSON decode      {raw:10.0f} ev/s")
        work = Path(tmp)
        c0 = [
            faust_variant("keyed", broker, topic, args.events, 0, work, noop=True) for _ in range(args.repeat)
        ]
        print(f"(c0) KeyedAgent runtime, no-op sink  {_median(c0)}   (the runtime without the store)")
        for latency in args.latency_ms:
            runs: dict[str, list[float]] = {"plain": [], "naive": [], "keyed": []}
            for _ in range(args.repeat):
                for variant, out in runs.items():
                    out.append(faust_variant(variant, broker, topic, args.events, latency, work))
            b1, b2, c = (statistics.median(runs[v]) for v in ("plain", "naive", "keyed"))
            print(f"-- sink latency {latency:g} ms per write (SQLite store)")
            print(f"(b1) plain Faust agent, no writes   {_median(runs['plain'])}")
            print(f"(b2) naive Faust agent, awaits each {_median(runs['naive'])}")
            print(f"(c)  KeyedAgent runtime             {_median(runs['keyed'])}")
            print(f"     c/a = {c / raw:.2f}   c/b1 = {c / b1:.2f}   c/b2 = {c / b2:.2f}   (medians)")


if __name__ == "__main__":
    main()
