"""An entity's contributions written to the store: the projector's target for an aggregate.

``ContributionIndex`` is a ``SearchIndex`` whose "documents" are entities' contributions
(``Aggregate.build``: ``{group id: measures}``) and whose storage is the aggregate's tables in
the wide-column store: ``_contrib`` by entity, ``_members`` by group bucket, the same cells in both.
Writing an entity's document compares it with the contributions stored for it and writes only
the groups whose measures differ: a group it joined or changed gets its measures, a group it
left gets ``NONE`` (an empty cell, not a tombstone). Each such cell is written at the entity's
version mark, or one above the cell's stored write time when that is as high: an entity's
document is rebuilt from its current rows each time (one entity's changes are projected one
after the other), and a late write of an older event changes the rows without raising the
mark, so the document written last must win even at an equal mark, which the store's
last-write-wins only guarantees with a higher write time. A tombstone could not be overtaken
that way (its write time cannot be read back), hence ``NONE``. A replay at the same mark
finds nothing to change, and a document computed at a lower mark than the highest one the
entity's stored cells record (``mark``: an older state, from a job or a worker that lost the
entity meanwhile) is not written. Then every group the entity is or was in is announced
(``announce``, with the entity's bucket) for its total to be recomputed (``totals.py``), changed
or not: a worker
killed between writing an entity's contributions and announcing them leaves its change record
unacknowledged, and the worker that projects it again finds nothing to write but must still
announce those groups.

Groups holding an erased subject in a personal part (``Aggregate.personal``): with a ``screen``
(``framework.erasure.groups.group_screen``), a group it withholds is left out of every
document written, so neither a contribution nor an announcement of it is written again; the
erasure deleted its rows for good (``framework.erasure.groups``).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from framework.aggregates.tables import AggregateTables, decode_measures, encode_measures, tables_of
from framework.core.aggregate import Aggregate, Group, parse_group_id, parse_series, series_id
from framework.core.mutations import Mutation, Upsert
from stores.base import BulkItem, BulkResult, IndexOp, SearchHit, SearchIndex, WideColumnStore

__all__ = ["ContributionIndex", "Announce", "Changed", "GroupScreen", "NONE"]

#: The ``measures`` of a group an entity left: a live cell, so that its write time stays readable.
NONE = ""

#: A group and one of its buckets whose members may have changed.
Changed = tuple[Group, int]
#: ``announce(aggregate, changed)``: the groups (and buckets) entities are or were in, for their totals.
Announce = Callable[[Aggregate, Sequence[Changed]], Awaitable[None]]
#: ``withheld(aggregate, group)``: True for a group holding an erased subject (never written).
GroupScreen = Callable[[Aggregate, Group], bool]


class ContributionIndex(SearchIndex):
    """The contributions of ``aggregates`` (by name, their alias) in ``store``; ``screen`` gives the
    current test of erased subjects' groups (None, or giving None: nobody's groups withheld)."""

    def __init__(
        self,
        store: WideColumnStore,
        aggregates: Sequence[Aggregate],
        announce: Announce,
        *,
        screen: Callable[[], GroupScreen | None] | None = None,
    ) -> None:
        self.store = store
        self.aggregates = {a.name: a for a in aggregates}
        self.announce = announce
        self.screen = screen

    def _aggregate(self, alias: str) -> Aggregate:
        try:
            return self.aggregates[alias]
        except KeyError:
            raise KeyError(f"no aggregate {alias!r} (aggregates: {sorted(self.aggregates)})") from None

    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        for schema in tables_of(self._aggregate(alias)).all:
            await self.store.ensure_table(schema)
        return alias

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        await self.bulk(alias, [IndexOp(doc_id, version, doc)])
        return True

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        await self.bulk(alias, [IndexOp(doc_id, version, None)])
        return True

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        """Write each entity's contributions (see the module docstring); announce its groups."""
        agg = self._aggregate(alias)
        t = tables_of(agg)
        ids = list(dict.fromkeys(op.doc_id for op in ops))
        read = await self.store.read_partitions(t.contrib.name, [{"entity": i} for i in ids])
        stored = {
            doc_id: {
                _gid(r.key): (str(r.cells["measures"].value), r.version, _mark(r))
                for r in rows
                if "measures" in r.cells
            }
            for doc_id, rows in zip(ids, read, strict=True)
        }
        writes: list[Mutation] = []
        groups: dict[str, Group] = {}
        touched: dict[Changed, None] = {}
        withheld = self.screen() if self.screen is not None and agg.personal else None
        for op in ops:
            had = stored[op.doc_id]
            if op.version < max((mark for _, _, mark in had.values()), default=0):
                continue  # computed at a lower mark than what is stored: from an older state
            now = {gid: encode_measures(m) for gid, m in (op.doc or {}).items()}
            if withheld is not None:
                now = {gid: m for gid, m in now.items()
                       if not withheld(agg, groups.setdefault(gid, parse_group_id(gid)))}  # fmt: skip
            bucket = agg.bucket_of(op.doc_id)
            for gid in sorted(now.keys() | had.keys()):
                g = groups.setdefault(gid, parse_group_id(gid))
                touched[(g, bucket)] = None
                text = now.get(gid, NONE)
                before = had.get(gid)
                if (before[0] if before is not None else NONE) == text:
                    continue
                version = op.version if before is None else max(op.version, before[1] + 1)
                writes += _put(t, op.doc_id, g, bucket, text, version, op.version)
                had[gid] = (text, version, op.version)
        if writes:
            await self.store.apply(writes)
        if touched:
            await self.announce(agg, list(touched))
        return BulkResult([BulkItem(op.doc_id, "ok", 200) for op in ops])

    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        t = tables_of(self._aggregate(alias))
        rows = await self.store.read_partition(t.contrib.name, {"entity": doc_id})
        return _hit(doc_id, rows)

    async def get_many(self, alias: str, doc_ids: Sequence[str]) -> list[SearchHit | None]:
        t = tables_of(self._aggregate(alias))
        read = await self.store.read_partitions(t.contrib.name, [{"entity": i} for i in doc_ids])
        return [_hit(doc_id, rows) for doc_id, rows in zip(doc_ids, read, strict=True)]

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        hits = []
        async for hit in self.scan(alias):
            hits.append(hit)
            if len(hits) >= size:
                break
        return hits

    async def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        t = tables_of(self._aggregate(alias))
        by_entity: dict[str, list[Any]] = {}
        async for row in self.store.scan(t.contrib.name, shard=slice_id, shards=slices):
            by_entity.setdefault(str(row.key["entity"]), []).append(row)
        for doc_id, rows in sorted(by_entity.items()):
            hit = _hit(doc_id, rows)
            if hit is not None:
                yield hit

    async def refresh(self, alias: str) -> None:
        return None

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        raise NotImplementedError("an aggregate's contributions live in the store: there is no index to swap")

    async def close(self) -> None:
        return None


def _gid(key: Mapping[str, Any]) -> str:
    """The group id of a ``_contrib`` or ``_members`` row's key."""
    return _group_id(str(key["series"]), int(key["window"]))


@functools.lru_cache(maxsize=65_536)
def _group_id(series: str, window: int) -> str:
    """The id of the group of ``series`` (its stored text) and ``window`` (rows repeat groups)."""
    return Group(tuple(parse_series(series)), window).id


def _mark(row: Any) -> int:
    """The mark a ``_contrib`` row was computed at (its write time for a row without one)."""
    cell = row.cells.get("mark")
    return int(cell.value) if cell is not None and cell.value is not None else int(row.version)


def _put(
    t: AggregateTables, entity: str, g: Group, bucket: int, text: str, version: int, mark: int
) -> list[Mutation]:
    series = series_id(g.series)
    return [
        Upsert(t.contrib.name, {"entity": entity, "series": series, "window": g.window},
               {"measures": text, "mark": mark}, version),
        Upsert(t.members.name, {"series": series, "window": g.window, "bucket": bucket, "entity": entity},
               {"measures": text}, version),
    ]  # fmt: skip


def _hit(doc_id: str, rows: Sequence[Any]) -> SearchHit | None:
    live = [r for r in rows if r.cells.get("measures") is not None and r.cells["measures"].value != NONE]
    if not live:
        return None
    doc = {_gid(r.key): decode_measures(r.cells["measures"].value) for r in live}
    return SearchHit(doc_id, max(r.version for r in live), doc)
