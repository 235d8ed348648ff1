"""Per-event CPU of the worker's pure-Python stages, without Kafka: parsing and mapping the
reference app's events, the SQLite engine's batch apply of the mutations they give, and the
projector's reads of each batch's changed partitions (one ``read_partition`` per partition
against one ``read_partitions`` per table, side by side).

    python -m benchmarks.map_apply --events 20000 --repeat 3

Parsing and mapping runs over the raw JSON of a generated history; the apply writes batches
of about 1,500 mutations (the demo's micro-batches) into a fresh file. Best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.core.events import parse_event
from framework.core.mutations import Mutation
from framework.core.rows import Row
from framework.runtime.mapping import map_event
from stores.sqlite.engine import SqliteEngine


def mapped_batches(raw: list[bytes], size: int = 1500) -> list[list[Mutation]]:
    """Parse and map every event; the mutations in batches of at least ``size``."""
    batches: list[list[Mutation]] = []
    current: list[Mutation] = []
    for data in raw:
        event = parse_event(data)
        agent = app.route(event)
        current += map_event(agent, event, app.views_of(agent))
        if len(current) >= size:
            batches.append(current)
            current = []
    return [*batches, current]


def apply_all(batches: list[list[Mutation]]) -> tuple[float, float, float]:
    """Seconds to apply ``batches`` into a fresh SQLite file, then to read every batch's
    changed partitions of the projection's tables one at a time, and all at once."""
    (projection,) = app.projections
    with tempfile.TemporaryDirectory() as tmp:
        engine = SqliteEngine(Path(tmp) / "wide.db")
        try:
            for schema in app.tables:
                engine.ensure_table(schema)
            started = time.perf_counter()
            for batch in batches:
                engine.apply(batch)
            applying = time.perf_counter() - started
            touched = [[dict(key) for key, _version in projection.touched(b).values()] for b in batches]
            tables = [t.name for t in projection.tables]

            def singly() -> list[list[list[Row]]]:
                return [[engine.read_partition(t, k) for k in keys] for keys in touched for t in tables]

            def together() -> list[list[list[Row]]]:
                return [engine.read_partitions(t, keys) for keys in touched for t in tables]

            assert singly()[:50] == together()[:50]
            best = {singly: float("inf"), together: float("inf")}
            for read in (singly, together, together, singly):  # alternating; results not kept
                gc.collect()
                started = time.perf_counter()
                read()
                best[read] = min(best[read], time.perf_counter() - started)
            return applying, best[singly], best[together]
        finally:
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    raw = [e.to_json() for e in generate_history(7, args.events).events]
    mapping = applying = singly = together = float("inf")
    mutations = 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        batches = mapped_batches(raw)
        mapping = min(mapping, time.perf_counter() - started)
        mutations = sum(map(len, batches))
        a, s, t = apply_all(batches)
        applying, singly, together = min(applying, a), min(singly, s), min(together, t)
    n = len(raw)
    print(f"{n} events ({mutations} mutations), best of {args.repeat}")
    print(f"parse + map   {mapping / n * 1e6:6.1f} us/event")
    print(f"SQLite apply  {applying / n * 1e6:6.1f} us/event  {applying / mutations * 1e6:5.1f} us/mutation")
    print(f"projector reads: read_partition each {singly / n * 1e6:6.1f} us/event", end="")
    print(f", read_partitions {together / n * 1e6:6.1f} us/event, ratio {singly / together:4.2f}x")


if __name__ == "__main__":
    main()
