"""Apply a collapsed ID map to the store: move each cell of an old id to the id it belongs to.

For every ``(tenant, id)`` of the map and every declared owner table, the
partition ``(tenant, id)`` is read; each live cell whose final id
(``final_of(intervals, id, cell.writetime)``) is not ``id`` is

- written under the final id (same clustering key, value and write time; the
  remaining TTL when the cell expires: both stores return a cell's expiry),
  unless the final id is None (deleted), and
- deleted under ``id`` by a *cell* tombstone at that cell's own write time.

Why cell tombstones at each moved cell's version make repeated applies and
late writes converge (per-cell last-write-wins, a tombstone wins a tie):

- The moved copy and the tombstone carry the cell's write time, so applying
  the map again rewrites the same cells (idempotent), and a moved cell is
  never moved again (``final_of`` of a final id at that version is the final
  id itself, see ``framework.idmutation.collapse``).
- A late write under the old id with a *lower or equal* version stays
  shadowed: the old id's cell already held something at least as new, which
  the oracle (every write placed directly under its final id) would also let
  win, as long as both belong to the same final id (see the limit below).
- A late write with a *higher* version survives the tombstone and is moved
  by the next apply (the job sweeps the partitions that notifications name).
- A row or partition tombstone would shadow every other cell of the row up
  to its version, including live cells a later write of another column puts
  there, which is why the unit of deletion is the cell.

Limits (documented in docs/how-to/id-mutation.md):

- One cell of one id holds one value. When writes that reach the same cell
  of an old id belong to different final ids (an id moved twice or re-used,
  so its versions split among finals; or a cell moved into an id that was
  itself moved at an older version), the older write is shadowed there before
  any map moves it; the stream's resolution step avoids this for events that
  arrive after the map.
- Row and partition tombstones written under the old id (an app's ``Delete``)
  are not moved: Cassandra returns no tombstone to a read, and the embedded
  SQLite engine keeps them (the ``ts`` of a packed row) but its
  store contract returns only live cells too. What they shadow under the old
  id is gone (not moved); cells of that row written directly under the new id
  at lower versions are not shadowed by them.

Every moved or deleted cell is recorded with its origin
(``framework.idmutation.routes``), a deleted one with its value; before the
partitions are read, ``apply_id_map`` routes the recorded cells of every
changed id again (``reroute``), so a request learnt later moves what earlier
maps moved or dropped. Cells that cannot follow (a final that flips back to
an id already tombstoned at the cell's version, a recorded tombstone moved
away) are counted in ``unconverged`` and logged.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.mutations import CellValue, Delete, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import TableSchema
from framework.idmutation.collapse import Interval, final_of
from framework.idmutation.declare import IdMutation, OwnerColumn, id_value
from framework.idmutation.routes import (
    ROUTES_TABLE,
    RouteReport,
    Verdict,
    cell_records,
    encode_value,
    reroute,
    row_text,
)
from stores.base import WideColumnStore

__all__ = [
    "Apply",
    "ApplyReport",
    "ExtraWrites",
    "apply_id_map",
    "reroute_recorded",
    "sweep",
    "moves_of_partition",
    "id_value",
    "LookupIntervals",
    "PHASES",
]

#: The two passes of ``apply_id_map``, in order: recorded cells routed again, then partitions read.
PHASES = ("routes", "cells")

#: ``lookup(pairs)``: the intervals of those ``(tenant, id)`` that have some (others left out).
LookupIntervals = Callable[
    [Sequence[tuple[str, str]]], Awaitable[Mapping[tuple[str, str], Sequence[Interval]]]
]
#: ``apply(writes)``: a store's ``apply``.
Apply = Callable[[Sequence[Mutation]], Awaitable[None]]
#: ``extra(apply, writes, moves)``: applies one chunk's ``writes`` (``moves``: its owner-table
#: writes) through ``apply`` with what goes with them (notifications, re-projection marks).
ExtraWrites = Callable[[Apply, Sequence[Mutation], Sequence[Mutation]], Awaitable[None]]


@dataclass
class ApplyReport:
    """What an apply (or a sweep) read and wrote."""

    partitions_read: int = 0
    cells_moved: int = 0
    cells_deleted: int = 0
    #: recorded cells written under a new final id (``framework.idmutation.routes``)
    rerouted: int = 0
    #: recorded cells that cannot reach their final id (logged; see ``framework.idmutation.routes``)
    unconverged: int = 0
    #: ``(table, key)`` of every row written: the old row (cell tombstones) and the new one
    touched: list[tuple[str, dict[str, CellValue]]] = field(default_factory=list)
    #: rows touched that were counted but not listed (reports added from Spark tasks)
    touched_elsewhere: int = 0
    seconds: float = 0.0

    @property
    def rows_touched(self) -> int:
        return len(self.touched) + self.touched_elsewhere

    def add(self, other: ApplyReport) -> None:
        """Add another report's counts and rows to this one."""
        self.partitions_read += other.partitions_read
        self.cells_moved += other.cells_moved
        self.cells_deleted += other.cells_deleted
        self.rerouted += other.rerouted
        self.unconverged += other.unconverged
        self.touched.extend(other.touched)
        self.touched_elsewhere += other.touched_elsewhere
        self.seconds += other.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions_read": self.partitions_read,
            "cells_moved": self.cells_moved,
            "cells_deleted": self.cells_deleted,
            "rerouted": self.rerouted,
            "unconverged": self.unconverged,
            "rows_touched": self.rows_touched,
            "seconds": round(self.seconds, 3),
        }


def moves_of_partition(
    schema: TableSchema,
    owner: OwnerColumn,
    ident: str,
    intervals: Sequence[Interval],
    rows: Iterable[Row],
    now_s: float,
    report: ApplyReport,
) -> list[Mutation]:
    """The writes that move the cells of one partition of id ``ident`` (rows as read), with the
    records of each cell taken away (``framework.idmutation.routes``)."""
    out: list[Mutation] = []
    records: list[Mutation] = []
    for row in rows:
        moved: dict[tuple[str, int, int | None], dict[str, CellValue]] = defaultdict(dict)
        dropped: dict[int, list[str]] = defaultdict(list)
        recorded_row = None
        for name, cell in row.cells.items():
            final = final_of(intervals, ident, cell.writetime)
            if final == ident:
                continue
            dropped[cell.writetime].append(name)
            ttl = None if cell.expires_at is None else max(1, math.ceil(cell.expires_at - now_s))
            if recorded_row is None:
                recorded_row = row_text(row.key, owner.id_column)
            tenant = str(row.key[owner.tenant_column])
            records += cell_records(tenant, ident, schema.name, recorded_row, name, cell.writetime,
                                    encode_value(cell.value), ttl, final, origin_gone=True)  # fmt: skip
            if final is None:
                continue
            moved[(final, cell.writetime, ttl)][name] = cell.value
        if not dropped:
            continue
        old_key = dict(row.key)
        report.touched.append((schema.name, old_key))
        for version, names in sorted(dropped.items()):
            out.append(Delete(schema.name, old_key, version, tuple(names)))
            report.cells_deleted += len(names)
        new_keys: set[str] = set()
        for (final, version, ttl), cells in moved.items():
            key = {**old_key, owner.id_column: id_value(schema, owner.id_column, final)}
            out.append(Upsert(schema.name, key, cells, version, ttl))
            report.cells_moved += len(cells)
            if final not in new_keys:
                new_keys.add(final)
                report.touched.append((schema.name, key))
    return out + records


def _write(store: WideColumnStore, writes: Sequence[Mutation], extra: ExtraWrites | None) -> Awaitable[None]:
    """Apply ``writes``, through ``extra`` with its writes for their moves (owner-table writes)."""
    moves = [w for w in writes if w.table != ROUTES_TABLE.name]
    if extra is None or not moves:
        return store.apply(writes)
    return extra(store.apply, writes, moves)


async def _apply_pairs(
    store: WideColumnStore,
    config: IdMutation,
    collapsed: Mapping[tuple[str, str], Sequence[Interval]],
    targets: Mapping[str, Sequence[tuple[str, str]]],
    *,
    chunk: int,
    clock: Callable[[], float],
    extra: ExtraWrites | None,
) -> ApplyReport:
    """Read, plan and write chunk after chunk; a chunk's write overlaps the next chunk's read and
    plan (safe: a moved cell is final, so no read waits for an earlier chunk's writes, and the
    writes commute under last-write-wins)."""
    started = time.perf_counter()
    report = ApplyReport()
    writing: asyncio.Task[None] | None = None
    try:
        for owner in config.columns:
            pairs = list(targets.get(owner.table, ()))
            if not pairs:
                continue
            schema = store.schema(owner.table)
            for start in range(0, len(pairs), chunk):
                part = pairs[start : start + chunk]
                keys = [
                    {owner.tenant_column: tenant, owner.id_column: id_value(schema, owner.id_column, ident)}
                    for tenant, ident in part
                ]
                found = await store.read_partitions(owner.table, keys)
                report.partitions_read += len(part)
                now_s = clock()
                writes: list[Mutation] = []
                for (tenant, ident), rows in zip(part, found, strict=True):
                    if rows:
                        writes += moves_of_partition(
                            schema, owner, ident, collapsed[(tenant, ident)], rows, now_s, report
                        )
                if writes:
                    if writing is not None:
                        await writing
                    writing = asyncio.ensure_future(_write(store, writes, extra))
        if writing is not None:
            await writing
            writing = None
    finally:
        if writing is not None and not writing.done():
            writing.cancel()
    report.seconds = time.perf_counter() - started
    return report


async def reroute_recorded(
    store: WideColumnStore,
    config: IdMutation,
    collapsed: Mapping[tuple[str, str], Sequence[Interval]],
    *,
    chunk: int = 500,
    clock: Callable[[], float] = time.time,
    extra: ExtraWrites | None = None,
    erased: Verdict | None = None,
) -> ApplyReport:
    """Route the recorded cells of every ``(tenant, id)`` of ``collapsed`` where its intervals now
    send them (``framework.idmutation.routes.reroute``; ``erased``: the erasure screen's verdict,
    whose erased subjects' cells are not routed); one read and one ``apply`` per ``chunk``."""
    started = time.perf_counter()
    report = ApplyReport()
    await store.ensure_table(ROUTES_TABLE)
    owners = {c.table: c for c in config.columns}
    pairs = sorted(collapsed)
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        found = await store.read_partitions(ROUTES_TABLE.name, [{"tenant": t, "origin": i} for t, i in part])
        now_s = clock()
        routed = RouteReport()
        writes: list[Mutation] = []
        for (tenant, ident), rows in zip(part, found, strict=True):
            if rows:
                intervals = collapsed[(tenant, ident)]
                writes += reroute(owners, store.schema, tenant, ident, intervals, rows, now_s, routed, erased)
        report.rerouted += routed.rerouted
        report.unconverged += routed.unconverged
        report.touched += routed.touched
        if writes:
            await _write(store, writes, extra)
    report.seconds = time.perf_counter() - started
    return report


async def apply_id_map(
    store: WideColumnStore,
    config: IdMutation,
    collapsed: Mapping[tuple[str, str], Sequence[Interval]],
    *,
    chunk: int = 500,
    clock: Callable[[], float] = time.time,
    extra: ExtraWrites | None = None,
    phases: Sequence[str] = PHASES,
    erased: Verdict | None = None,
) -> ApplyReport:
    """Move the cells of every ``(tenant, id)`` of ``collapsed`` in every owner table (see the
    module docstring): first its recorded cells routed again (phase ``routes``), then its
    partitions read and moved (phase ``cells``); one read and one ``apply`` per ``chunk``
    partitions, with ``extra``'s writes for that chunk's moves. A caller that splits the pairs
    over tasks runs the ``routes`` phase of all of them before any ``cells`` phase. ``erased``: the
    erasure screen's verdict (``SubjectScreen.verdict``): an erased subject's recorded cells are
    not routed again (their records are deleted)."""
    report = ApplyReport()
    if "routes" in phases:
        routes = reroute_recorded(
            store, config, collapsed, chunk=chunk, clock=clock, extra=extra, erased=erased
        )
        report.add(await routes)
    if "cells" in phases:
        pairs = sorted(collapsed)
        targets = {owner.table: pairs for owner in config.columns}
        moved = await _apply_pairs(store, config, collapsed, targets, chunk=chunk, clock=clock, extra=extra)
        report.add(moved)
    return report


def _pair_of(owner: OwnerColumn, key: Mapping[str, CellValue]) -> tuple[str, str] | None:
    tenant, ident = key.get(owner.tenant_column), key.get(owner.id_column)
    if tenant is None or ident is None:
        return None
    return (str(tenant), str(ident))


async def sweep(
    store: WideColumnStore,
    config: IdMutation,
    lookup_intervals: LookupIntervals,
    keys: Iterable[tuple[str, Mapping[str, CellValue]]],
    *,
    chunk: int = 500,
    clock: Callable[[], float] = time.time,
    extra: ExtraWrites | None = None,
    erased: Verdict | None = None,
) -> ApplyReport:
    """Apply the map to the partitions named by ``keys`` (``(table, row or partition key)``, e.g.
    from notifications) whose ``(tenant, id)`` has intervals: a key of ``converge_id_routes``
    routes that origin's recorded cells again (a worker wrote them with an older map), a key of
    an owner table moves that partition's cells; keys of other tables are ignored."""
    targets: dict[str, set[tuple[str, str]]] = defaultdict(set)
    origins: set[tuple[str, str]] = set()
    for table, key in keys:
        if table == ROUTES_TABLE.name:
            tenant, origin = key.get("tenant"), key.get("origin")
            if tenant is not None and origin is not None:
                origins.add((str(tenant), str(origin)))
            continue
        owner = config.column(table)
        if owner is not None and (pair := _pair_of(owner, key)) is not None:
            targets[table].add(pair)
    wanted = sorted({p for pairs in targets.values() for p in pairs} | origins)
    if not wanted:
        return ApplyReport()
    found = await lookup_intervals(wanted)
    collapsed = {p: found[p] for p in wanted if p in found}
    report = ApplyReport()
    routed = {p: collapsed[p] for p in sorted(origins) if p in collapsed}
    if routed:
        routes = reroute_recorded(store, config, routed, chunk=chunk, clock=clock, extra=extra, erased=erased)
        report.add(await routes)
    chosen = {t: sorted(p for p in pairs if p in collapsed) for t, pairs in targets.items()}
    report.add(await _apply_pairs(store, config, collapsed, chosen, chunk=chunk, clock=clock, extra=extra))
    return report
