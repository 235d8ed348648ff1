"""Erasure throughput on a large table: rows scanned per second, time per subject, verification.

A SQLite store file gets ``--rows`` support-desk tickets (identity, subject and
requester cells; requesters drawn from a pool so each has a few tickets).
Then, for ``--subjects`` requesters: ``find_rows`` alone (the scan), the
whole ``erase`` (scan, deny-list, cell tombstones at MAX_VERSION, marks,
audit entry; no index, no WAL), and ``verify`` (scans every table of the
app for the value). Figures are printed side by side with the load average.

    python -m benchmarks.erasure --rows 1000000 --subjects 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path

from examples.support_desk.app import app
from examples.support_desk.identity import ticket_id
from framework.core.mutations import Upsert
from framework.erasure.declare import Subject
from framework.erasure.find import find_rows
from framework.erasure.run import erase
from framework.erasure.verify import verify
from stores.sqlite.store import SqliteStore

KEY = b"benchmark-erasure-key-0123456789"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def fill(store: SqliteStore, rows: int, pool: int, seed: int) -> float:
    rng = random.Random(seed)
    started = time.perf_counter()
    batch: list[Upsert] = []
    for n in range(rows):
        who = rng.randrange(pool)
        cells = {"tenant": f"t{n % 17}", "source": "zendesk", "external_id": str(n), "subject": "Printer jam",
                 "requester_email": f"person{who}@example.org", "requester_name": f"Person {who}",
                 "priority": "normal"}  # fmt: skip
        key = {"ticket_id": ticket_id(f"t{n % 17}", "zendesk", str(n))}
        batch.append(Upsert("ticket", key, cells, 1 + n))
        if len(batch) == 5000:
            await store.apply(batch)
            batch = []
    if batch:
        await store.apply(batch)
    return time.perf_counter() - started


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await SqliteStore.open(Path(tmp) / "wide.db")
        try:
            for t in app.tables:
                await store.ensure_table(t)
            pool = max(1, args.rows // args.per_subject)
            print(f"load average before: {_load()}")
            filled = await fill(store, args.rows, pool, args.seed)
            print(f"filled {args.rows} ticket rows ({pool} requesters) in {filled:.1f}s "
                  f"({args.rows / filled:,.0f} rows/s); load {_load()}")  # fmt: skip
            head = ("subject", "rows", "scan s", "scanned/s", "erase s", "verify s")
            print("{:>8} {:>5} {:>8} {:>11} {:>8} {:>9}".format(*head))
            for i in range(args.subjects):
                subject = Subject("email", f"person{i * 7 + 1}@example.org")
                t0 = time.perf_counter()
                found = await find_rows(store, app, subject)
                scan = time.perf_counter() - t0
                t0 = time.perf_counter()
                report = await erase(app, subject, key=KEY, store=store)
                erased = time.perf_counter() - t0
                t0 = time.perf_counter()
                residue = await verify(app, subject, key=KEY, store=store)
                checked = time.perf_counter() - t0
                assert not residue, residue
                n = sum(report.cells.values())
                assert n == len(found.deletes)
                rate = found.scanned / scan
                print(f"{i:>8} {n:>5} {scan:>8.2f} {rate:>11,.0f} {erased:>8.2f} {checked:>9.2f}")
            print(f"load average after: {_load()}")
        finally:
            await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--per-subject", type=int, default=5, help="tickets per requester, on average")
    ap.add_argument("--subjects", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
