"""What the stream's id resolution costs per event: ``map_event`` of one owner-table event without
``id_mutation``, with an empty map, and with a map of N mutated ids (memory and RocksDB tables),
side by side.

    .venv/bin/python -m benchmarks.id_resolution [--events 200000] [--ids 100000] [--hit 0.3]

The events write one ``owner_activity`` row each (``tests/idmutation/stream_app.py``'s agent);
``--hit`` of them carry an id the map holds (a chain to another id). Pure CPU: no store, no
broker; the figure is microseconds per event (best of 3).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from framework.idmutation.resolution import IdMap, IdResolution, mapped_event
from framework.runtime.mapping import map_event
from framework.state.kv import RocksKV
from tests.idmutation.stream_app import OwnerAgent, activity, app


def _events(n: int, ids: int, hit: float, rng: random.Random) -> list:
    out = []
    for i in range(n):
        owner = f"m{rng.randrange(ids)}" if rng.random() < hit else f"u{rng.randrange(ids)}"
        out.append(activity(f"e{i}", "t1", owner, f"a{i % 7}", 1000 + i, body="b"))
    return out


def _time(agent: OwnerAgent, events: list, resolve: IdResolution | None) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for e in events:
            map_event(agent, e, (), None, resolve)
        best = min(best, time.perf_counter() - start)
    return best / len(events) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--ids", type=int, default=100_000)
    parser.add_argument("--hit", type=float, default=0.3)
    args = parser.parse_args(argv)
    rng = random.Random(1)
    events = _events(args.events, args.ids, args.hit, rng)
    agent = OwnerAgent()
    columns = app.id_mutation.columns  # type: ignore[union-attr]
    rows = [("no id_mutation", _time(agent, events, None))]
    rows.append(("empty map", _time(agent, events, IdResolution(columns, IdMap(app.name)))))
    with tempfile.TemporaryDirectory() as tmp:
        for label, kv in (("memory", None), ("RocksDB", RocksKV(Path(tmp) / "idmap"))):
            m = IdMap(app.name, kv)
            for i in range(args.ids):
                m.feed(mapped_event("t1", f"m{i}", [(None, None, f"c{i}")], 1))
            resolve = IdResolution(columns, m)
            rows.append((f"{args.ids:,} ids, {label}", _time(agent, events, resolve)))
            assert resolve.resolved > 0
            if kv is not None:
                kv.close()
    print(f"map_event of one owner-table event ({args.events:,} events, {args.hit:.0%} with a mapped id)")
    base = rows[0][1]
    for label, us in rows:
        print(f"  {label:<28} {us:6.2f} us/event  ({us - base:+5.2f})")


if __name__ == "__main__":
    main()
