"""The stream's id resolution: owner ids of a mapping's output rewritten through the collapsed map.

``handle`` stays pure and writes whatever id its event carries. After it
returned (``map_event``, ``JoinBook.plan``, the backfill's mapper), the
runtime passes the mutations through ``IdResolution``: every ``Upsert``,
``Delete`` and ``LogState`` of a declared owner table whose owner id has an
entry in the map gets ``final_of(intervals, id, mutation.version)`` as its
owner id; a final of None (the owner was deleted) drops the mutation from
the owner tables (counted ``id_deleted``); a version that no interval
covers keeps the id. Every mutation moved or dropped is also recorded with
its origin id and its cells (``framework.idmutation.routes``): a request
learnt later re-routes it (the job's ``apply_id_map``), a dropped one
included.
It runs before the erasure screen and the projections' version marks, so
both see the final partition.

The map (``IdMap``) is a lookup table built on ``framework.state``: the
entries the ID mutation job publishes on ``map_topic_of(app)`` as events of
type ``id.mapped`` (payload ``tenant``, ``id``, ``intervals``; the version is
the job's batch number), merged per ``(tenant, id)`` with the lookup rule
(higher version wins). A missing entry means "never mutated": the id stays.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from framework.core.events import Event
from framework.core.lookup import Entry, Lookup
from framework.core.mutations import Mutation, Upsert
from framework.idmutation.collapse import Interval, final_of
from framework.idmutation.declare import IdMutation, OwnerColumn, map_topic_of
from framework.idmutation.routes import mutation_records
from framework.state.entries import SEP, EntryTables
from framework.state.kv import KV

__all__ = [
    "MAPPED_TYPE",
    "IdMap",
    "IdResolution",
    "map_key",
    "map_lookup",
    "mapped_event",
    "check_intervals",
    "resolutions_for",
]

log = logging.getLogger("framework.idmutation")

#: The event type of a map entry on ``map_topic_of(app)``.
MAPPED_TYPE = "id.mapped"
_LOOKUP = "converge_id_map"
#: ids whose intervals (or absence) an ``IdMap`` keeps parsed in memory
_CACHED = 500_000
#: The cache's answer for a key it does not hold (its values may be None).
_MISSING: Literal[False] = False
_NS = uuid.UUID("5b0d7c1e-6f7a-4d0e-9a53-2c1f0b7e9d41")


def map_key(tenant: str, ident: str) -> str:
    """The entry key of ``(tenant, id)``: the tenant's length first, so no two pairs collide."""
    return f"{len(tenant)}:{tenant}:{ident}"


def check_intervals(raw: Any) -> list[Interval]:
    """``raw`` as a list of ``(after, upto, final)``; ValueError unless each bound is an int or None
    and each final a non-empty string or None."""
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError("intervals must be a non-empty list")
    out: list[Interval] = []
    for item in raw:
        if not isinstance(item, list | tuple) or len(item) != 3:
            raise ValueError(f"interval {item!r} is not [after, upto, final]")
        after, upto, final = item
        for bound in (after, upto):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise ValueError(f"interval bound {bound!r} is not an integer or null")
        if final is not None and (not isinstance(final, str) or not final or len(final) > 512):
            raise ValueError(f"interval final {final!r} is not a string of 1 to 512 characters or null")
        out.append((after, upto, final))
    return out


def _entry_key(event: Event) -> str | None:
    if event.type != MAPPED_TYPE:
        return None
    tenant, ident = event.payload.get("tenant"), event.payload.get("id")
    if not isinstance(tenant, str) or not tenant or not isinstance(ident, str) or not ident:
        raise ValueError("an id.mapped payload needs a non-empty tenant and id")
    return map_key(tenant, ident)


def _entry_value(event: Event) -> dict[str, Any]:
    return {"intervals": [list(i) for i in check_intervals(event.payload.get("intervals"))]}


def map_lookup(app_name: str) -> Lookup:
    """The lookup the worker reads the map into (not declared by the app: added for ``id_mutation``)."""
    return Lookup(_LOOKUP, map_topic_of(app_name), key=_entry_key, value=_entry_value)


def mapped_event(tenant: str, ident: str, intervals: Sequence[Interval], version: int) -> Event:
    """The map entry of ``(tenant, id)`` as the job publishes it (``version``: its batch number)."""
    key = map_key(tenant, ident)
    return Event(
        event_id=str(uuid.uuid5(_NS, f"{version}{SEP}{key}")),
        ordering_key=key,
        version=version,
        occurred_at=version,
        type=MAPPED_TYPE,
        payload={"tenant": tenant, "id": ident, "intervals": [list(i) for i in intervals]},
    )


class _MapTables(EntryTables):
    """Entry tables that tell their ``IdMap`` when any map event was fed (the feed of the
    worker applies events straight to them)."""

    def __init__(self, owner: IdMap, lookups: Iterable[Lookup], kv: KV | None) -> None:
        super().__init__(lookups, kv)
        self.owner = owner

    def feed(self, topic: str, event: Event) -> list[tuple[str, str]]:
        self.owner.empty = False
        return super().feed(topic, event)


class IdMap:
    """The collapsed map of one app as the stream reads it: ``(tenant, id) -> intervals``.

    ``tables`` is a ``framework.state.EntryTables`` with the map's lookup
    (RocksDB in the worker, memory in the test driver); ``feed`` applies an
    event of the map topic, ``changed`` is told of entries a feed applied.
    """

    def __init__(self, app_name: str, kv: KV | None = None) -> None:
        self.lookup = map_lookup(app_name)
        self.topic = self.lookup.topic
        self.tables = _MapTables(self, [self.lookup], kv)
        #: True while no map event was ever read (no stored offset, nothing fed): resolution skips
        self.empty = not any(int(v) > 0 for _, v in self.tables.kv.scan(f"O{SEP}"))
        self._parsed: dict[str, list[Interval] | None] = {}
        self._prefix = f"N{SEP}{_LOOKUP}{SEP}"

    def feed(self, event: Event) -> list[tuple[str, str]]:
        """Apply one event of the map topic; the entries that changed."""
        changed = self.tables.feed(self.topic, event)
        self.changed(changed)
        return changed

    def changed(self, keys: Iterable[tuple[str, str]]) -> None:
        """Entries changed in ``tables`` (the worker's feed applied them)."""
        for _, key in keys:
            self.empty = False
            self._parsed.pop(key, None)

    def intervals(self, tenant: str, ident: str) -> list[Interval] | None:
        """The intervals of ``(tenant, id)``; None when it was never mutated."""
        key = f"{len(tenant)}:{tenant}:{ident}"  # map_key, inlined: this runs per owner-table write
        found = self._parsed.get(key, _MISSING)
        if found is False:
            text = self.tables.kv.get(self._prefix + key)
            found = None if text is None else check_intervals(Entry.from_json(text).value["intervals"])
            if len(self._parsed) >= _CACHED:
                self._parsed.clear()
            self._parsed[key] = found
        return found

    def size(self) -> int:
        """How many ids the map holds (a scan: for reports)."""
        return self.tables.count(_LOOKUP)


def _with_key(m: Mutation, key: dict[str, Any]) -> Mutation:
    """``m`` under ``key``: a copy without validating again what ``m`` already validated (the new
    id is a checked text of at most 512 characters, or an integer)."""
    cls = type(m)
    out = object.__new__(cls)
    for name in cls.__slots__:
        object.__setattr__(out, name, getattr(m, name))
    object.__setattr__(out, "key", MappingProxyType(key))
    return out


class IdResolution:
    """Rewrites one agent's owner ids through the map (see the module docstring). A callable with
    the erasure screen's signature: ``(event, mutations) -> mutations``."""

    def __init__(self, owners: Iterable[OwnerColumn], id_map: Any) -> None:
        self.owners: dict[str, OwnerColumn] = {c.table: c for c in owners}
        #: anything with ``empty`` and ``intervals(tenant, id)``: an ``IdMap`` or a batch table
        self.map = id_map
        self.resolved = 0
        self.deleted = 0

    def counters(self) -> dict[str, int]:
        """``id_resolved`` (mutations moved to another id) and ``id_deleted`` (dropped)."""
        return {"id_resolved": self.resolved, "id_deleted": self.deleted}

    def _final(self, m: Mutation) -> tuple[bool, Mutation | None, list[Upsert]]:
        """(changed, the mutation under its final id or None when dropped, its route records)."""
        col = self.owners.get(m.table)
        if col is None:
            return False, m, []
        tenant, value = m.key.get(col.tenant_column), m.key.get(col.id_column)
        if tenant is None or value is None or isinstance(value, bool | float | bytes):
            return False, m, []
        ident = str(value)  # ids are text in requests; an integer column holds them as numbers
        intervals = self.map.intervals(str(tenant), ident)
        if intervals is None:
            return False, m, []
        final = final_of(intervals, ident, m.version)
        if final == ident:
            return False, m, []
        records = mutation_records(col, ident, m, final)
        if final is None:
            return True, None, records
        moved = _with_key(m, {**m.key, col.id_column: final if isinstance(value, str) else int(final)})
        return True, moved, records

    def __call__(self, event: Event, mutations: list[Mutation]) -> list[Mutation]:
        """``mutations`` with owner ids resolved (the same list when nothing changed), followed by
        the route records of the ones moved or dropped."""
        if self.map.empty:
            return mutations
        out: list[Mutation] | None = None
        records: list[Upsert] = []
        for i, m in enumerate(mutations):
            changed, final, recorded = self._final(m)
            if not changed:
                if out is not None:
                    out.append(m)
                continue
            if out is None:
                out = list(mutations[:i])
            records += recorded
            if final is None:
                self.deleted += 1
                log.debug("id resolution: event %s: %s %s kept as a record: its owner id was deleted",
                          event.event_id, m.table, type(m).__name__)  # fmt: skip
            else:
                self.resolved += 1
                out.append(final)
        return mutations if out is None else [*out, *records]


def resolutions_for(
    config: IdMutation | None, agents: Iterable[Any], id_map: Any
) -> Mapping[str, IdResolution]:
    """One resolution per agent that writes a declared owner table (none for the others: no cost)."""
    if config is None:
        return {}
    out: dict[str, IdResolution] = {}
    for agent in agents:
        written = {t.name for t in agent.tables}
        owners = [c for c in config.columns if c.table in written]
        if owners:
            out[agent.name] = IdResolution(owners, id_map)
    return out
