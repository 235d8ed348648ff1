"""Lookup joins: worker events/s with and without a join, and restoring a large entry table.

1. Throughput: the real worker (``converge worker``, SQLite store in its data
   dir, embedded noida-db) maps the same child events with the lookup join
   (``lookup_apps.join_app``: every event reads its conversation's entry, the
   join state goes to its changelog before the ack) and without
   (``plain_app``). Each worker first drains a warm-up batch; the figure is
   the measured batch divided by the time until its group has committed it.
2. Restore: ``--entries`` entry events on a lookup topic, read into a fresh
   RocksDB entry table by ``EntryFeed.catch_up`` (what a worker with a new
   data dir does before it consumes).

    python -m benchmarks.lookup_join --events 20000 --entries 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.state.entries import EntryTables
from framework.state.feed import EntryFeed
from framework.state.kv import RocksKV
from framework.worker.processes import start_worker, stop_worker

CONVS = 1000


def _event(eid: str, key: str, type_: str, payload: dict, version: int) -> tuple[bytes, bytes]:
    body = {"event_id": eid, "ordering_key": key, "version": version, "occurred_at": version,
            "type": type_, "payload": payload}  # fmt: skip
    return key.encode(), json.dumps(body, separators=(",", ":")).encode()


def parents(n: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [_event(f"p{i}", f"c{i}", "parent.set", {"conv": f"c{i}", "parent": f"P{i}", "label": "l"}, 1)
            for i in range(start, start + n)]  # fmt: skip


def children(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    return [_event(f"{tag}{i}", f"c{i % CONVS}", "child.posted",
                   {"conv": f"c{i % CONVS}", "msg_id": f"{tag}{i}", "body": "hello"}, 10 + i)
            for i in range(n)]  # fmt: skip


def throughput(broker: str, root: Path, app: str, name: str, events: int) -> float:
    """Events/s of one worker of ``app`` (consumer group ``name``) on ``events`` child events."""
    proc = start_worker(app, root / name, broker, {"CONVERGE_APP_ID": name, "CONVERGE_PARTITIONS": "4"})
    try:
        asyncio.run(produce(broker, "bench.children", children(500, f"{name}-warm")))
        assert asyncio.run(wait_drained(broker, name, "bench.children", timeout=300)), "warm-up"
        asyncio.run(produce(broker, "bench.children", children(events, f"{name}-run")))
        started = time.perf_counter()
        assert asyncio.run(wait_drained(broker, name, "bench.children", timeout=1200)), "run"
        return events / (time.perf_counter() - started)
    finally:
        stop_worker(proc)


async def restore(broker: str, root: Path, n: int) -> tuple[float, int]:
    """Seconds to read ``n`` entry events into a fresh entry table, and the entries it holds."""
    from benchmarks.lookup_apps import join_app

    kv = RocksKV(root / "restore")
    tables = EntryTables(join_app.lookups, kv)

    async def ignore(changed: list[tuple[str, str]]) -> None:
        return None

    feed = EntryFeed(broker, tables, ignore)
    started = time.perf_counter()
    await feed.start()
    await feed.catch_up()
    seconds = time.perf_counter() - started
    await feed.stop()
    count = tables.count("conv")
    kv.close()
    return seconds, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--entries", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp) / "stack") as stack:
        assert stack.info is not None
        broker = f"kafka://{stack.info.kafka_bootstrap}"
        root = Path(tmp)
        asyncio.run(ensure_topics(broker, {"bench.parents": 4, "bench.children": 4}))
        asyncio.run(produce(broker, "bench.parents", parents(CONVS)))
        print(f"load before: {os.getloadavg()[0]:.2f}")
        plain = throughput(broker, root, "benchmarks.lookup_apps:plain_app", "bench-plain", args.events)
        join = throughput(broker, root, "benchmarks.lookup_apps:join_app", "bench-join", args.events)
        print(f"{args.events} child events, {CONVS} conversations, 4 partitions, one worker each")
        print(f"  without join: {plain:8.0f} events/s")
        print(f"  with join:    {join:8.0f} events/s  ({join / plain:.2f}x)")
        print(f"load after throughput: {os.getloadavg()[0]:.2f}")
        if args.entries:
            t0 = time.perf_counter()
            step = 100_000
            for start in range(CONVS, CONVS + args.entries, step):
                batch = parents(min(step, CONVS + args.entries - start), start)
                asyncio.run(produce(broker, "bench.parents", batch))
            print(f"produced {args.entries} more entry events in {time.perf_counter() - t0:.1f}s")
            seconds, count = asyncio.run(restore(broker, root, args.entries))
            print(f"restore: {count} entries into a fresh RocksDB table in {seconds:.1f}s "
                  f"({count / seconds:,.0f} entries/s)")  # fmt: skip
            print(f"load after restore: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
