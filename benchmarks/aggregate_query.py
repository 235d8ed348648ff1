"""Interactive query latency on a group of 1,000,000 contributions, and that group's recomputation.

The store is the embedded SQLite store holding three aggregates of the same ``--contributions``
synthetic items, all in one organisation: ``item_total`` (no window: one group of every item),
``item_total_buckets`` (the same over 1,024 buckets, ``Aggregate.buckets``) and ``item_daily``
(daily windows of the item's time: one series of 90 windows, about 11,000 items each). The
contributions are written through the real code, the cheapest honest way: each item's document
is its aggregate's own ``build`` (``contribute``) and goes through ``ContributionIndex.bulk``,
the projector's target (it reads the items' ``_contrib`` partitions, empty here, and writes the
``_contrib`` and ``_members`` rows), 2,000 items a call; the groups it announces are collected
and their totals written by ``recompute`` (``totals.py``, what the totals processor runs). No
source rows, change feed or Kafka: the queries read only ``_totals``, and the recomputation only
``_members`` (and ``_buckets``).

Measured, after 200 untimed queries of each kind: p50, p99 and max latency (ms) of ``--queries``
sequential queries of (i) the group total of ``item_total`` and (ii) a 30-day window range of
``item_daily`` (30 windows), both through ``Queries`` in this process and through the HTTP
routes (``QueryRoutes`` on an aiohttp server bound to 127.0.0.1 in a child process, as a
worker's web server mounts them; the client is an aiohttp session in this process, so the HTTP
figures include the client's request and JSON decoding); then (iii) the time of ``recompute``
of the one group of ``--contributions`` (it reads every member and writes the total), run
``--recomputes`` times, and, once, of the 90 daily groups; (iv) the same group over 1,024
buckets: the recomputation after one item's change (its bucket and the bucket rows), at least
50 times, and of every bucket once. Every answer is checked (the total's
member count, 30 windows holding their share of the items). The calibration line comes first
(``benchmarks.calibration.calibrate``).

    python -m benchmarks.aggregate_query --contributions 1000000 --queries 5000 --recomputes 5
    python -m benchmarks.aggregate_query --contributions 100000 --queries 2000 --recomputes 3  # short
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
from aiohttp import web

from framework.aggregates.contributions import Changed, ContributionIndex
from framework.aggregates.http import QueryRoutes
from framework.aggregates.query import Queries
from framework.aggregates.totals import recompute
from framework.core.aggregate import Aggregate, Contribution, Group, MeasureKind, Window
from framework.core.cells import Cell
from framework.core.mutations import CellValue
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from stores.base import IndexOp
from stores.sqlite.store import SqliteStore

DAY = 86_400
DAYS = 90
START = 1_700_006_400  # a UTC midnight: window starts
ORG = "org1"
BATCH = 2_000
WARM_UP = 200
ITEM = TableSchema(
    "bench_item",
    (Column("item", "text"),),
    (Column("org", "text"), Column("n", "bigint"), Column("at", "bigint")),
)


class _Items(Aggregate):
    """Items, the sum and the largest of their ``n``, per organisation."""

    tables = (ITEM,)
    group_by = ("org",)
    measures: ClassVar[Mapping[str, MeasureKind]] = {"items": "count", "n": "sum", "largest": "max"}

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        return [
            Contribution(
                {"org": r["org"]},
                {"n": float(str(r["n"])), "largest": float(str(r["n"]))},
                at=float(str(r["at"])),
            )  # fmt: skip
            for r in (row.values() for row in rows[ITEM.name])
        ]


class ItemTotal(_Items):
    """``_Items`` without a window: one group per organisation."""

    name = "item_total"

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        return [Contribution(c.group, c.measures) for c in super().contribute(key, rows)]


class ItemTotalBuckets(ItemTotal):
    """``ItemTotal`` over 1,024 buckets a group (``Aggregate.buckets``)."""

    name = "item_total_buckets"
    buckets: ClassVar[int] = 1024


class ItemDaily(_Items):
    """``_Items`` in daily windows of the item's time."""

    name = "item_daily"
    window = Window(DAY)


TOTAL, BUCKETED, DAILY = ItemTotal(), ItemTotalBuckets(), ItemDaily()
VIEWS = (TOTAL, BUCKETED, DAILY)


def item(i: int) -> tuple[dict[str, Any], dict[str, Sequence[Row]], int]:
    """Item ``i``'s key, rows and version (deterministic; day ``i % 90``)."""
    version = 1_000 + i
    cells: dict[str, CellValue] = {"org": ORG, "n": i % 1000, "at": START + (i % DAYS) * DAY + i % DAY}
    key = {"item": f"item-{i:09d}"}
    return key, {ITEM.name: [Row(key, {c: Cell(v, version) for c, v in cells.items()})]}, version


async def populate(store: SqliteStore, n: int) -> dict[Aggregate, dict[Group, int]]:
    """Every item's contributions to the three aggregates through ``ContributionIndex``; the groups each
    announced, with the highest version announcing them."""
    announced: dict[Aggregate, dict[Group, int]] = {a: {} for a in VIEWS}
    version = 0

    async def announce(aggregate: Aggregate, groups: Sequence[Changed]) -> None:
        for g, _ in groups:
            announced[aggregate][g] = version

    index = ContributionIndex(store, VIEWS, announce)
    for a in VIEWS:
        await index.ensure_index(a.name)
    writing: asyncio.Future[Any] | None = None
    for start in range(0, n, BATCH):
        ops: dict[Aggregate, list[IndexOp]] = {a: [] for a in VIEWS}
        for i in range(start, min(n, start + BATCH)):
            key, rows, version = item(i)
            for a in VIEWS:
                ops[a].append(IndexOp(key["item"], version, a.build(key, rows)))
        if writing is not None:
            await writing  # one batch written while the next is built
        writing = asyncio.gather(*(index.bulk(a.name, ops[a]) for a in VIEWS))
    if writing is not None:
        await writing
    return announced


async def timed(fn: Callable[[], Awaitable[None]], count: int) -> list[float]:
    """``count`` sequential calls of ``fn`` after ``WARM_UP`` untimed ones; each one's milliseconds."""
    for _ in range(WARM_UP):
        await fn()
    out = []
    for _ in range(count):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def quantiles(ms: list[float]) -> str:
    """p50, p99 and max of ``ms``."""
    p99 = statistics.quantiles(ms, n=100)[98]
    return f"p50 {statistics.median(ms):7.3f}  p99 {p99:7.3f}  max {max(ms):7.3f} ms"


def _check_total(found: Mapping[str, Any], n: int) -> None:
    if found["members"] != n or found["measures"]["items"] != n:
        raise RuntimeError(f"group total: {found['members']} members, expected {n}")


def _check_windows(found: Mapping[str, Any], n: int) -> None:
    windows = found["windows"]
    items = sum(w["measures"]["items"] for w in windows)
    if len(windows) != 30 or abs(items - n * 30 / DAYS) > 30:
        raise RuntimeError(f"window range: {len(windows)} windows of {items} items, expected 30 of ~{n // 3}")


SINCE, UNTIL = START + 30 * DAY, START + 60 * DAY


async def in_process(store: SqliteStore, n: int, count: int) -> dict[str, list[float]]:
    """(i) and (ii) through ``Queries``."""
    q = Queries(store, VIEWS)

    async def total() -> None:
        _check_total((await q.total(TOTAL.name, {"org": ORG})).to_dict(), n)

    async def windows() -> None:
        _check_windows((await q.windows(DAILY.name, {"org": ORG}, SINCE, UNTIL)).to_dict(), n)

    return {"total": await timed(total, count), "windows": await timed(windows, count)}


async def over_http(port: int, n: int, count: int) -> dict[str, list[float]]:
    """(i) and (ii) through ``GET /query/...`` of the server on ``port``."""
    base = f"http://127.0.0.1:{port}/query"
    async with aiohttp.ClientSession() as http:

        async def get(path: str, params: dict[str, str]) -> Any:
            async with http.get(f"{base}/{path}", params=params) as r:
                if r.status != 200:
                    raise RuntimeError(f"GET {path}: {r.status} {await r.text()}")
                return await r.json()

        async def total() -> None:
            _check_total(await get("total", {"aggregate": TOTAL.name, "group.org": ORG}), n)

        async def windows() -> None:
            params = {"aggregate": DAILY.name, "group.org": ORG, "since": str(SINCE), "until": str(UNTIL)}
            _check_windows(await get("windows", params), n)

        return {"total": await timed(total, count), "windows": await timed(windows, count)}


async def serve(path: Path) -> None:
    """The ``/query`` routes over the store at ``path`` on 127.0.0.1; prints the port, serves until killed."""
    store = SqliteStore(path)
    app = web.Application()
    QueryRoutes(lambda: store, VIEWS).install(app.router)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    print(sock.getsockname()[1], flush=True)
    await asyncio.Event().wait()


async def recompute_times(
    store: SqliteStore,
    aggregate: Aggregate,
    announced: Mapping[Group, int],
    runs: int,
    one_bucket: bool = False,
) -> list[float]:
    """Seconds of each of ``runs`` recomputations of ``aggregate``'s one group (each at a higher
    version): every member, or with ``one_bucket`` the bucket of one item (a change's cost)."""
    ((group, version),) = announced.items()
    out = []
    for k in range(runs):
        buckets = {group: [aggregate.bucket_of(item(k)[0]["item"])]} if one_bucket else None
        started = time.perf_counter()
        live = await recompute(store, aggregate, {group: version + 1 + k}, buckets=buckets)
        out.append(time.perf_counter() - started)
        assert live == 1
    return out


async def measure(path: Path, n: int, queries: int, recomputes: int) -> None:
    """Build the store at ``path`` and print every figure."""
    store = SqliteStore(path)
    try:
        started = time.perf_counter()
        announced = await populate(store, n)
        built = time.perf_counter() - started
        print(f"{n:,} items written to the three aggregates (ContributionIndex) in {built:.1f} s", flush=True)
        first = await recompute_times(store, TOTAL, announced[TOTAL], 1)
        whole = await recompute_times(store, BUCKETED, announced[BUCKETED], 1)
        started = time.perf_counter()
        live = await recompute(store, DAILY, announced[DAILY])
        daily = time.perf_counter() - started
        assert live == DAYS, live
        local = await in_process(store, n, queries)
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.aggregate_query", "--serve", str(path)],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            remote = await over_http(port, n, queries)
        finally:
            proc.terminate()
            proc.wait(10)
        again = await recompute_times(store, TOTAL, announced[TOTAL], recomputes)
        bucket = await recompute_times(store, BUCKETED, announced[BUCKETED], max(recomputes, 50), True)
    finally:
        await store.close()
    print(f"-- {queries:,} sequential queries of each kind after {WARM_UP} untimed ones")
    for where, figures in (("Queries (in process)", local), ("HTTP /query (127.0.0.1)", remote)):
        print(f"(i)  group total, {n:,} contributions, {where:<24} {quantiles(figures['total'])}")
        print(f"(ii) 30-day window range (30 windows), {where:<24} {quantiles(figures['windows'])}")
    runs = first + again
    med = statistics.median(runs)
    print(f"(iii) recompute of the group of {n:,} contributions: median {med:.2f} s ({min(runs):.2f}-"
          f"{max(runs):.2f}, {len(runs)} runs) = {n / med:,.0f} contributions/s")  # fmt: skip
    print(f"(iv) the same group over {BUCKETED.buckets:,} buckets: one bucket's change median "
          f"{statistics.median(bucket) * 1000:.1f} ms ({min(bucket) * 1000:.1f}-{max(bucket) * 1000:.1f},"
          f" {len(bucket)} runs); every bucket once {whole[0]:.2f} s")  # fmt: skip
    print(f"      recompute of the 90 daily groups ({n // DAYS:,} contributions each), once: {daily:.2f} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"      peak RSS of this process (the store's reads included): {peak:,.0f} MiB")


def main() -> None:
    from benchmarks.calibration import calibrate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contributions", type=int, default=1_000_000, help="items in the one group")
    ap.add_argument("--queries", type=int, default=5_000, help="timed queries of each kind and path")
    ap.add_argument("--recomputes", type=int, default=5, help="timed recomputations of the big group")
    ap.add_argument("--calibration-records", type=int, default=200_000)
    ap.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the HTTP server's child
    args = ap.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.serve))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(calibrate(Path(tmp) / "calibration", args.calibration_records), flush=True)
        asyncio.run(measure(Path(tmp) / "wide.db", args.contributions, args.queries, args.recomputes))


if __name__ == "__main__":
    main()
