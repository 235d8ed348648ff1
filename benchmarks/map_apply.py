"""Per-event CPU of the worker's two pure-Python stages, without Kafka: parsing and mapping the
reference app's events, and the SQLite engine's batch apply of the mutations they give.

    python -m benchmarks.map_apply --events 20000 --repeat 3

Parsing and mapping runs over the raw JSON of a generated history; the apply writes batches
of about 1,500 mutations (the demo's micro-batches) into a fresh file. Best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.core.events import parse_event
from framework.core.mutations import Mutation
from framework.runtime.mapping import map_event
from stores.sqlite.engine import SqliteEngine


def mapped_batches(raw: list[bytes], size: int = 1500) -> list[list[Mutation]]:
    """Parse and map every event; the mutations in batches of at least ``size``."""
    batches: list[list[Mutation]] = []
    current: list[Mutation] = []
    for data in raw:
        event = parse_event(data)
        agent = app.route(event)
        current += map_event(agent, event, app.projections_of(agent))
        if len(current) >= size:
            batches.append(current)
            current = []
    return [*batches, current]


def apply_all(batches: list[list[Mutation]]) -> float:
    """Seconds to apply ``batches`` into a fresh SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = SqliteEngine(Path(tmp) / "wide.db")
        try:
            for schema in app.tables:
                engine.ensure_table(schema)
            started = time.perf_counter()
            for batch in batches:
                engine.apply(batch)
            return time.perf_counter() - started
        finally:
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    raw = [e.to_json() for e in generate_history(7, args.events).events]
    mapping = applying = float("inf")
    mutations = 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        batches = mapped_batches(raw)
        mapping = min(mapping, time.perf_counter() - started)
        mutations = sum(map(len, batches))
        applying = min(applying, apply_all(batches))
    n = len(raw)
    print(f"{n} events ({mutations} mutations), best of {args.repeat}")
    print(f"parse + map   {mapping / n * 1e6:6.1f} us/event")
    print(f"SQLite apply  {applying / n * 1e6:6.1f} us/event  {applying / mutations * 1e6:5.1f} us/mutation")


if __name__ == "__main__":
    main()
