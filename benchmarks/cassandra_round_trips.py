"""Requests per micro-batch of the Cassandra store: one per write against one per partition.

    python -m benchmarks.cassandra_round_trips --tickets 2000 --batch 500 --cap 100

Starts the CQL test server in-process (``tests.support.cql_server``; it counts
the requests it receives per opcode and logs every BATCH it applies) and opens
two ``CassandraStore``s on it by URL, each in its own keyspace: ``per write``
(``max_batch_statements=1``: one EXECUTE per write, the strategy before
grouping) and ``grouped`` (one UNLOGGED batch per table and partition, at most
``--cap`` writes). Every micro-batch is applied by both, and the server's
counters are read around each ``apply``. Two workloads:

- ``support desk``: the reference app's history (``examples.support_desk``),
  each agent's events in source order cut into micro-batches of ``--batch``
  events, mapped by the agent, all their mutations in one ``apply`` (as the
  runtime's ``WideColumnSink.write_batch`` does);
- ``hot partitions``: synthetic batches of ``--batch`` mutations, 80 % state-log
  rows over 20 hot entities and 20 % hub rows of a partition each.

These are round trips to a test double, not Cassandra: they say nothing of
Cassandra's speed. PREPARE is counted apart (once per statement shape and store).
At the end the two keyspaces are scanned and must hold the same rows.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from collections import Counter
from collections.abc import Sequence

from examples.support_desk.agents import support_agents
from examples.support_desk.generator import generate_history
from examples.support_desk.schemas import TABLES
from framework.core.mutations import LogState, Mutation, Upsert
from framework.core.schema import Column, TableSchema, state_log_schema
from stores.cassandra import CassandraStore
from tests.support.cql_server import CqlServer

OPCODES = ("EXECUTE", "BATCH", "QUERY")

HOT_LOG = state_log_schema("hot_log", (Column("entity", "text"),), attrs=(Column("actor", "text"),))
HOT_HUB = TableSchema(
    name="hot_hub",
    partition_key=(Column("id", "text"),),
    columns=(Column("title", "text"), Column("n", "bigint")),
)


def support_desk_batches(tickets: int, batch: int) -> list[list[Mutation]]:
    """Each agent's events in source order, ``batch`` events a micro-batch, mapped to mutations."""
    history = generate_history(7, tickets)
    out: list[list[Mutation]] = []
    for agent in support_agents():
        events = [e for e in history.events if e.type in agent.event_types]
        for start in range(0, len(events), batch):
            out.append([m for e in events[start : start + batch] for m in agent.handle(e)])
    return out


def hot_partition_batches(batches: int, size: int, seed: int = 7) -> list[list[Mutation]]:
    """``size`` mutations a batch: 80 % log rows over 20 hot entities, 20 % hub rows of one partition each."""
    rng = random.Random(seed)
    out: list[list[Mutation]] = []
    version = 1_700_000_000_000_000
    for b in range(batches):
        mutations: list[Mutation] = []
        for i in range(size):
            version += 1
            if i % 5 == 4:
                key = {"id": f"h{b}-{i}"}
                mutations.append(Upsert(HOT_HUB.name, key, {"title": "t", "n": i}, version))
            else:
                entity = f"e{rng.randrange(20)}"
                at = version // 1000
                mutations.append(
                    LogState(HOT_LOG.name, {"entity": entity}, "open", at, f"ev{version}", version)
                )
        out.append(mutations)
    return out


def partitions(mutations: Sequence[Mutation], schemas: dict[str, TableSchema]) -> int:
    """Distinct (table, partition key) pairs of a batch."""
    return len({(m.table, tuple(m.key[c.name] for c in schemas[m.table].partition_key)) for m in mutations})


async def _apply(server: CqlServer, store: CassandraStore, mutations: Sequence[Mutation]) -> Counter[str]:
    before = Counter(server.requests)
    await store.apply(mutations)
    return Counter(server.requests) - before


async def run(
    name: str,
    server: CqlServer,
    url: str,
    schemas: Sequence[TableSchema],
    batches: list[list[Mutation]],
    cap: int,
) -> None:
    stores = {
        "per write": await CassandraStore.from_url(
            f"{url}_single?create_keyspace=true&max_batch_statements=1"
        ),
        "grouped": await CassandraStore.from_url(
            f"{url}_grouped?create_keyspace=true&max_batch_statements={cap}"
        ),
    }
    by_name = {s.name: s for s in schemas}
    try:
        for store in stores.values():
            for schema in schemas:
                await store.ensure_table(schema)
        counts: dict[str, list[Counter[str]]] = {k: [] for k in stores}
        server.batches.clear()
        for mutations in batches:
            for label, store in stores.items():
                counts[label].append(await _apply(server, store, mutations))
        sizes = [b.statements for b in server.batches]
        mixed = sum(1 for b in server.batches if len(b.partitions) != 1)
        same = await _same_rows(stores["per write"], stores["grouped"], schemas)
    finally:
        for store in stores.values():
            await store.close()
    n = len(batches)
    muts = statistics.mean(len(b) for b in batches)
    parts = statistics.mean(partitions(b, by_name) for b in batches)
    print(f"\n{name}: {n} micro-batches, {muts:.1f} mutations and {parts:.1f} partitions per batch (mean)")
    print(f"{'':>10} | {'EXECUTE':>8} | {'BATCH':>6} | {'QUERY':>6} | {'requests':>8} | PREPARE (total)")
    per_batch: dict[str, float] = {}
    for label, cs in counts.items():
        mean = {op: sum(c[op] for c in cs) / n for op in OPCODES}
        per_batch[label] = sum(mean.values())
        prepares = sum(c["PREPARE"] for c in cs)
        row = " | ".join(f"{mean[op]:>{w}.1f}" for op, w in zip(OPCODES, (8, 6, 6), strict=True))
        print(f"{label:>10} | {row} | {per_batch[label]:>8.1f} | {prepares}")
    ratio = per_batch["per write"] / per_batch["grouped"]
    print(f"requests per batch, per write / grouped: {ratio:.1f}x")
    print(
        f"batches sent: {len(sizes)}, statements per batch min/median/max "
        f"{min(sizes, default=0)}/{statistics.median(sizes) if sizes else 0:g}/{max(sizes, default=0)}, "
        f"spanning more than one partition: {mixed}; same rows in both keyspaces: {same}"
    )


async def _same_rows(a: CassandraStore, b: CassandraStore, schemas: Sequence[TableSchema]) -> bool:
    for schema in schemas:
        rows = []
        for store in (a, b):
            found = [r async for r in store.scan(schema.name)]
            rows.append(sorted((sorted(r.key.items()), sorted(r.cells.items())) for r in found))
        if rows[0] != rows[1]:
            return False
    return True


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tickets", type=int, default=2000, help="support desk tickets (default 2000)")
    parser.add_argument("--batch", type=int, default=500, help="events (or mutations) per micro-batch (500)")
    parser.add_argument("--hot-batches", type=int, default=20, help="synthetic hot-partition batches (20)")
    parser.add_argument("--cap", type=int, default=100, help="max statements per batch (default 100)")
    args = parser.parse_args(argv)
    with CqlServer() as server:
        url = f"cassandra://127.0.0.1:{server.port}/rt"
        await run(
            f"support desk ({args.tickets} tickets)",
            server,
            f"{url}_desk",
            TABLES,
            support_desk_batches(args.tickets, args.batch),
            args.cap,
        )
        await run(
            "hot partitions (synthetic)",
            server,
            f"{url}_hot",
            (HOT_LOG, HOT_HUB),
            hot_partition_batches(args.hot_batches, args.batch),
            args.cap,
        )


if __name__ == "__main__":
    asyncio.run(main())
