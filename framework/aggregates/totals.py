"""Group totals recomputed from the groups' current contributions, one group topic partition at a time.

The groups whose contributions changed (``contributions.py``) are announced on the
aggregate's group topic (``<app>.<aggregate>.groups``), in records of type
``groups_changed`` sent to the partition Kafka's default partitioner gives each group id, so
one consumer sees every announcement of a group, in order. For each record it reads the
group's ``_members`` partition, reduces it (``reduce``) and writes the ``_totals`` row at the
record's ``stream_version``, twice its offset plus two (a group with no contribution left has
its row deleted). Within a topic partition offsets only grow, and a record is read after the
contributions it announces were written, so the write at the highest offset is the one computed
last, from a state that includes every announced change: a replayed or duplicated record, or a
worker still finishing a record after its partition moved, writes at a lower offset and changes
nothing. A total is never adjusted by a delta.

Versions are spaced by two so that a writer outside the stream (``converge spark check
--repair``) has one of its own: ``repair_version(end)``, twice the partition's end offset plus
one, lies strictly above every record below the end and strictly below the next record's write,
so it neither ties with (a tie is won by the larger value, not the newer) nor shadows the
stream's next write. Totals stored under the former rule (offset plus one) lie at or below
``repair_version`` and strictly below ``stream_version`` of the same offset, so both replace them.

Buckets, for an aggregate that declares more than one (``Aggregate.buckets``): a record names,
beside each group, the buckets whose members changed (``buckets``: one list per group; a record
without it means every bucket). Each named bucket's ``_members`` partition is reduced into its
``_buckets`` row and the total is reduced from the group's bucket rows, all written at the same
version: the same argument makes each bucket row, and so the total, a pure function of
the current contributions.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from framework.aggregates.contributions import NONE, Changed
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

__all__ = [
    "GROUPS_TYPE",
    "group_records",
    "groups_named",
    "recompute",
    "repair_version",
    "stream_version",
    "TotalsProcessor",
]

GROUPS_TYPE = "groups_changed"


def stream_version(offset: int) -> int:
    """The version the stream writes a group's totals at, for the record at ``offset``: even."""
    return 2 * offset + 2


def repair_version(end: int) -> int:
    """The version a writer outside the stream writes totals at, with ``end`` the group topic
    partition's end offset read before it read any contribution: odd, above every record below
    ``end`` (at most ``stream_version(end - 1)``) and below the next one (``stream_version(end)``)."""
    return 2 * end + 1


def group_records(aggregate: Aggregate, changed: Sequence[Changed], partitions: int) -> list[ChangeRecord]:
    """The records announcing the ``changed`` groups (and buckets) on a group topic of ``partitions``
    partitions: every bucket of a group in the group's record."""
    by_group: dict[str, dict[int, None]] = {}
    for g, bucket in changed:
        by_group.setdefault(g.id, {})[bucket] = None
    by_part: dict[int, list[str]] = {}
    for gid in by_group:
        by_part.setdefault(change_partition(gid, partitions), []).append(gid)
    out: list[ChangeRecord] = []
    for part, ids in sorted(by_part.items()):
        for i in range(0, len(ids), MAX_CHANGES_PER_RECORD):
            chunk = ids[i : i + MAX_CHANGES_PER_RECORD]
            payload: dict[str, Any] = {"aggregate": aggregate.name, "groups": chunk}
            if aggregate.buckets > 1:
                payload["buckets"] = [sorted(by_group[gid]) for gid in chunk]
            key = f"{aggregate.name}/{part}"
            digest = hashlib.blake2b(repr(sorted(payload.items())).encode(), digest_size=12).hexdigest()
            event = Event(f"{key}/{digest}", key, 0, 0, GROUPS_TYPE, payload)
            out.append((part, key.encode(), event.to_json()))
    return out


def groups_named(event: Event, aggregate: Aggregate) -> list[tuple[Group, list[int] | None]]:
    """The groups a ``groups_changed`` record names, each with its changed buckets (None: every
    bucket, when the record names none); EventError when it is not one of ``aggregate``."""
    if event.type != GROUPS_TYPE:
        raise EventError("type", f"expected {GROUPS_TYPE}, got {event.type!r}")
    if event.payload.get("aggregate") != aggregate.name:
        raise EventError("payload.aggregate", f"not a group change of {aggregate.name!r}")
    ids = event.payload.get("groups")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise EventError("payload.groups", "missing, empty or not a list of group ids")
    try:
        groups = [parse_group_id(i) for i in ids]
    except ValueError as exc:
        raise EventError("payload.groups", str(exc)) from None
    buckets = event.payload.get("buckets")
    if buckets is None:
        return [(g, None) for g in groups]
    n = aggregate.buckets
    if (
        not isinstance(buckets, list) or len(buckets) != len(groups)
        or not all(isinstance(bs, list) and bs for bs in buckets)
        or not all(type(b) is int and 0 <= b < n for bs in buckets for b in bs)
    ):  # fmt: skip
        raise EventError("payload.buckets", f"not one non-empty list of buckets below {n} per group")
    return list(zip(groups, buckets, strict=True))


def _reduced(aggregate: Aggregate, rows: Sequence[Row]) -> dict[str, CellValue] | None:
    """The ``measures``, ``members`` and ``reflects`` of the ``_members`` rows of one bucket (None:
    no entity contributes)."""
    measured = [r for r in rows if r.cells.get("measures") is not None and r.cells["measures"].value != NONE]
    if not measured:
        return None
    each = (decode_measures(r.cells["measures"].value) for r in measured)
    return {
        "measures": encode_measures(reduce(aggregate.measures, each)),
        "members": len(measured),
        "reflects": max(r.version for r in measured),
    }


def _combined(aggregate: Aggregate, parts: Sequence[Mapping[str, CellValue]]) -> dict[str, CellValue]:
    """The totals of a group from its buckets' reductions (count and sum add, min and max compare)."""
    if len(parts) == 1:
        return dict(parts[0])
    measures = reduce(aggregate.measures, (decode_measures(p["measures"]) for p in parts))
    return {
        "measures": encode_measures(measures),
        "members": sum(cell_int(p["members"]) for p in parts),
        "reflects": max(cell_int(p["reflects"]) for p in parts),
    }


async def recompute(
    store: WideColumnStore,
    aggregate: Aggregate,
    groups: Mapping[Group, int],
    *,
    buckets: Mapping[Group, Collection[int] | None] | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Write the total of each group at its version, with its revision count when the aggregate
    counts them (``clock``: epoch seconds); returns how many groups have contributions. With more
    than one bucket, the ``buckets`` of a group whose members changed (every bucket when not
    given) are reduced from their ``_members`` partitions and written to ``_buckets`` at the same
    version, and the total is the reduction of the group's bucket rows."""
    t = tables_of(aggregate)
    n = aggregate.buckets
    order = list(groups)
    keys: list[dict[str, CellValue]] = [{"series": series_id(g.series), "window": g.window} for g in order]
    redo: list[list[int]] = []
    for g in order:
        asked = None if buckets is None else buckets.get(g)
        redo.append(list(range(n)) if asked is None or n == 1 else sorted(set(asked)))
    member_keys = [{**key, "bucket": b} for key, bs in zip(keys, redo, strict=True) for b in bs]
    counted = aggregate.window is not None and aggregate.final_after_s is not None
    nothing: list[list[Row]] = [[] for _ in keys]
    parts, held, stored = await asyncio.gather(
        store.read_partitions(t.members.name, member_keys),
        store.read_partitions(t.buckets.name, keys) if n > 1 else _given(nothing),
        store.read_rows(t.totals.name, keys) if counted else _given([None] * len(keys)),
    )
    now = clock() if counted else 0.0
    writes: list[Mutation] = []
    live = 0
    members = iter(parts)
    for g, key, bs, bucket_rows, before in zip(order, keys, redo, held, stored, strict=True):
        version = groups[g]
        sub: dict[int, dict[str, CellValue]] = {
            cell_int(r.key["bucket"]): r.values() for r in bucket_rows if r.cells.get("measures") is not None
        }
        for b in bs:
            reduced = _reduced(aggregate, next(members))
            bucket_key = {**key, "bucket": b}
            if reduced is not None:
                sub[b] = reduced
                if n > 1:
                    writes.append(Upsert(t.buckets.name, bucket_key, reduced, version))
            elif sub.pop(b, None) is not None:
                writes.append(Delete(t.buckets.name, bucket_key, version))
        cells: dict[str, CellValue] = {"measures": None, "members": None, "reflects": None}
        if sub:
            live += 1
            cells = _combined(aggregate, [sub[b] for b in sorted(sub)])
        revisions = _revisions(before, cells, aggregate.is_final(g.window, now)) if counted else 0
        if counted:
            cells["revisions"] = revisions
        if sub or revisions:
            writes.append(Upsert(t.totals.name, key, cells, version))
        else:
            writes.append(Delete(t.totals.name, key, version))
    if writes:
        await store.apply(writes)
    return live


async def _given(value: Any) -> Any:
    return value


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
    """Recomputes the totals of the groups each ``groups_changed`` record names, at its
    ``stream_version``."""

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

    def _groups(self, work: Work) -> list[tuple[Group, list[int] | None]]:
        event = work.event if work.event is not None else parse_work(work)
        try:
            return groups_named(event, self.aggregate)
        except EventError as exc:
            raise MessageError("map", exc) from exc

    async def __call__(self, work: Work) -> None:
        await self.write_batch([(work, self._groups(work))])

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        items: list[tuple[Work, list[tuple[Group, list[int] | None]]]] = []
        bad: list[tuple[Work, MessageError]] = []
        for work in works:
            try:
                items.append((work, self._groups(work)))
            except MessageError as exc:
                bad.append((work, exc))
        return items, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        versions: dict[Group, int] = {}
        buckets: dict[Group, set[int] | None] = {}
        for work, groups in items:
            for g, bs in groups:
                versions[g] = max(versions.get(g, 0), stream_version(work.offset))
                had = buckets.get(g, set())
                buckets[g] = None if bs is None or had is None else had | set(bs)
        written = recompute(self.store, self.aggregate, versions, buckets=buckets, clock=self.clock)
        await bounded("wide_column", self.sink_timeout, written)
