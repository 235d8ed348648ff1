"""Group totals recomputed from the groups' current contributions, one group topic partition at a time.

The groups whose contributions changed (``contributions.py``) are announced on the
aggregate's group topic (``<app>.<aggregate>.groups``), in records of type
``groups_changed`` sent to the partition Kafka's default partitioner gives each group id, so
one consumer sees every announcement of a group, in order. For each record it reads the
group's ``_members`` partition, reduces it (``reduce``) and writes the ``_totals`` row at the
record's offset plus one (a group with no contribution left has its row deleted). Within a
topic partition offsets only grow, and a record is read after the contributions it announces
were written, so the write at the highest offset is the one computed last, from a state that
includes every announced change: a replayed or duplicated record, or a worker still finishing
a record after its partition moved, writes at a lower offset and changes nothing. A total is
never adjusted by a delta.

Revisions, for a windowed aggregate that declares ``final_after_s`` (others pay nothing): the
groups' ``_totals`` rows are read too (one batched read), and when the window is final by the
injected clock and the new measures or members differ from the stored ones, the row's
``revisions`` is the stored count plus one, else the stored count. A window's first totals count
nothing (a backfill or a late first entity revises nothing a reader saw), nor does a replayed or
duplicated record (it recomputes the stored totals). A window emptied after it was final keeps a
row holding only its ``revisions``; one emptied with no revision is deleted.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from framework.aggregates.contributions import NONE
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.core.aggregate import Aggregate, Group, parse_group_id, reduce, series_id
from framework.core.events import Event, EventError
from framework.core.mutations import CellValue, Delete, Mutation, Upsert
from framework.core.rows import Row, cell_int
from framework.runtime.change_feed import MAX_CHANGES_PER_RECORD, ChangeRecord, change_partition
from framework.runtime.errors import MessageError
from framework.runtime.processor import bounded, parse_work
from framework.runtime.work import Work
from stores.base import WideColumnStore

__all__ = ["GROUPS_TYPE", "group_records", "groups_named", "recompute", "TotalsProcessor"]

GROUPS_TYPE = "groups_changed"


def group_records(aggregate: Aggregate, groups: Sequence[Group], partitions: int) -> list[ChangeRecord]:
    """The records announcing ``groups`` on a group topic of ``partitions`` partitions."""
    by_part: dict[int, list[str]] = {}
    for gid in dict.fromkeys(g.id for g in groups):
        by_part.setdefault(change_partition(gid, partitions), []).append(gid)
    out: list[ChangeRecord] = []
    for part, ids in sorted(by_part.items()):
        for i in range(0, len(ids), MAX_CHANGES_PER_RECORD):
            chunk = ids[i : i + MAX_CHANGES_PER_RECORD]
            key = f"{aggregate.name}/{part}"
            digest = hashlib.blake2b(repr(chunk).encode(), digest_size=12).hexdigest()
            event = Event(
                f"{key}/{digest}", key, 0, 0, GROUPS_TYPE, {"aggregate": aggregate.name, "groups": chunk}
            )
            out.append((part, key.encode(), event.to_json()))
    return out


def groups_named(event: Event, aggregate: Aggregate) -> list[Group]:
    """The groups a ``groups_changed`` record names; EventError when it is not one of ``aggregate``."""
    if event.type != GROUPS_TYPE:
        raise EventError("type", f"expected {GROUPS_TYPE}, got {event.type!r}")
    if event.payload.get("aggregate") != aggregate.name:
        raise EventError("payload.aggregate", f"not a group change of {aggregate.name!r}")
    ids = event.payload.get("groups")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise EventError("payload.groups", "missing, empty or not a list of group ids")
    try:
        return [parse_group_id(i) for i in ids]
    except ValueError as exc:
        raise EventError("payload.groups", str(exc)) from None


async def recompute(
    store: WideColumnStore,
    aggregate: Aggregate,
    groups: Mapping[Group, int],
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    """Write the total of each group (reduced from its ``_members`` partition) at its version, with
    its revision count when the aggregate counts them (``clock``: epoch seconds); returns how many
    groups have contributions."""
    t = tables_of(aggregate)
    order = list(groups)
    keys: list[dict[str, CellValue]] = [{"series": series_id(g.series), "window": g.window} for g in order]
    counted = aggregate.window is not None and aggregate.final_after_s is not None
    stored: list[Row | None] = [None] * len(keys)
    now = 0.0
    if counted:
        parts, stored = await asyncio.gather(
            store.read_partitions(t.members.name, keys), store.read_rows(t.totals.name, keys)
        )
        now = clock()
    else:
        parts = await store.read_partitions(t.members.name, keys)
    writes: list[Mutation] = []
    live = 0
    for g, key, rows, before in zip(order, keys, parts, stored, strict=True):
        measured = [
            r for r in rows if r.cells.get("measures") is not None and r.cells["measures"].value != NONE
        ]
        version = groups[g]
        cells: dict[str, CellValue] = {"measures": None, "members": None, "reflects": None}
        if measured:
            live += 1
            each = (decode_measures(r.cells["measures"].value) for r in measured)
            totals = reduce(aggregate.measures, each)
            cells = {
                "measures": encode_measures(totals),
                "members": len(measured),
                "reflects": max(r.version for r in measured),
            }
        revisions = _revisions(before, cells, aggregate.is_final(g.window, now)) if counted else 0
        if counted:
            cells["revisions"] = revisions
        if measured or revisions:
            writes.append(Upsert(t.totals.name, key, cells, version))
        else:
            writes.append(Delete(t.totals.name, key, version))
    if writes:
        await store.apply(writes)
    return live


def _revisions(before: Row | None, cells: Mapping[str, CellValue], final: bool) -> int:
    """The revision count of a totals row replacing ``before`` with ``cells`` (measures None: the
    group is empty): the stored count, plus one when the window is ``final`` and a stored row's
    measures or members change."""
    if before is None:
        return 0
    held = before.values()
    count = 0 if held.get("revisions") is None else cell_int(held["revisions"])
    changed = (held.get("measures"), held.get("members")) != (cells["measures"], cells["members"])
    return count + 1 if final and changed else count


class TotalsProcessor:
    """Recomputes the totals of the groups each ``groups_changed`` record names, at its offset + 1."""

    batchable = True

    def __init__(
        self,
        aggregate: Aggregate,
        store: WideColumnStore,
        sink_timeout: float = 10.0,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.aggregate, self.store, self.sink_timeout, self.clock = aggregate, store, sink_timeout, clock
        self.name = f"totals.{aggregate.name}"

    def prepare(self, work: Work) -> None:
        try:
            work.event = parse_work(work)
        except Exception:  # noqa: BLE001 - reported when the work runs
            work.event = None

    def _groups(self, work: Work) -> list[Group]:
        event = work.event if work.event is not None else parse_work(work)
        try:
            return groups_named(event, self.aggregate)
        except EventError as exc:
            raise MessageError("map", exc) from exc

    async def __call__(self, work: Work) -> None:
        await self.write_batch([(work, self._groups(work))])

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        items: list[tuple[Work, list[Group]]] = []
        bad: list[tuple[Work, MessageError]] = []
        for work in works:
            try:
                items.append((work, self._groups(work)))
            except MessageError as exc:
                bad.append((work, exc))
        return items, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        versions: dict[Group, int] = {}
        for work, groups in items:
            for g in groups:
                versions[g] = max(versions.get(g, 0), work.offset + 1)
        written = recompute(self.store, self.aggregate, versions, clock=self.clock)
        await bounded("wide_column", self.sink_timeout, written)
