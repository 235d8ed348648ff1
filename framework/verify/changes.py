"""Which documents a run of notification entries changed, per view.

An entry names the rows one batch changed in one table of one tenant; every view reading that
table may have a changed document in each row's partition. An entry that lists no keys (a batch
too large, ``reread``) stands for every partition of that tenant in the table: they are found
by scanning it, once per table for every tenant a run of entries names so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from framework.core.mutations import CellValue
from framework.core.projection import PartitionKey, Projection
from framework.notifications.entries import Entry, TenantOf, default_tenant_of, key_ident
from framework.notifications.schema import DEFAULT_TENANT
from stores.base import WideColumnStore

__all__ = ["Changed", "changed_documents"]


@dataclass
class Changed:
    """One view's documents to verify: partition keys by document id, each with the earliest
    ingestion time (epoch microseconds) of an entry naming it."""

    view: Projection
    keys: dict[str, PartitionKey] = field(default_factory=dict)
    since: dict[str, int] = field(default_factory=dict)

    def add(self, key: PartitionKey, ingested_at: int) -> None:
        doc_id = self.view.document_id(key)
        self.keys.setdefault(doc_id, key)
        if ingested_at < self.since.get(doc_id, ingested_at + 1):
            self.since[doc_id] = ingested_at


async def changed_documents(
    entries: Iterable[Entry],
    views: Sequence[Projection],
    store: WideColumnStore,
    tenant_of: TenantOf | None = None,
) -> list[Changed]:
    """The documents of each of ``views`` that ``entries`` name (``reread`` entries: every
    partition of their tenant in the table; ``tenant_of``: the app's, as its writers name
    tenants)."""
    tenant_of = tenant_of or default_tenant_of
    out = [Changed(v) for v in views]
    rereads: dict[tuple[str, str], int] = {}
    # per view, the earliest ingestion time added of each partition (by its key values): the
    # rows of one partition that entries name again cost a look-up only
    added: list[dict[tuple[CellValue, ...], int]] = [{} for _ in out]
    listing: dict[str, list[tuple[Changed, tuple[str, ...], dict[tuple[CellValue, ...], int]]]] = {}
    for entry in entries:
        if entry.keys is None:
            at = rereads.get((entry.table, entry.tenant), entry.ingested_at)
            rereads[(entry.table, entry.tenant)] = min(at, entry.ingested_at)
            continue
        views_of = listing.get(entry.table)
        if views_of is None:
            views_of = listing[entry.table] = [
                (c, tuple(c.view.key_names), first)
                for c, first in zip(out, added, strict=True)
                if entry.table in c.view.source_names
            ]
        at = entry.ingested_at
        for key in entry.keys:
            for changed, names, first in views_of:
                values = tuple([key[name] for name in names])
                if first.get(values, at + 1) <= at:
                    continue
                first[values] = at
                changed.add(dict(zip(names, values, strict=True)), at)
    by_table: dict[str, dict[str, int]] = {}  # each table scanned once for all its tenants
    for (table, tenant), at in sorted(rereads.items()):
        by_table.setdefault(table, {})[tenant] = at
    for table, tenants in by_table.items():
        readers = [c for c in out if table in c.view.source_names]
        if not readers:
            continue
        seen: set[str] = set()
        async for row in store.scan(table):
            named = tenant_of(table, row.key)
            since = tenants.get(DEFAULT_TENANT if named is None else str(named))
            if since is None:
                continue
            part = _partition(readers[0].view, row.key)
            ident = key_ident(part)
            if ident in seen:
                continue
            seen.add(ident)
            for changed in readers:
                changed.add(part, since)
    return [c for c in out if c.keys]


def _partition(view: Projection, key: Mapping[str, CellValue]) -> PartitionKey:
    return {name: key[name] for name in view.key_names}
