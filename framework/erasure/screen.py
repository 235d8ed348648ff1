"""The deny-list screen: writes of erased subjects removed from a mapping's output.

``map_event`` (stream and backfill alike) runs the agent's pure ``handle``,
then ``SubjectScreen(event, mutations)``: a pure function of the event, the
mutations and the deny-list snapshot it was built with. For every mutation of
a declared table whose declared cells hold an erased subject (compared by
keyed hash; the snapshot never holds a value):

- a declaration that deletes rows (``erase=None``) drops the mutation;
- one that tombstones cells removes those cells (and the matched ones) from
  the write, dropping it when nothing is left.

The route records that ID mutation's resolution adds for the writes it moved
or dropped (``converge_id_routes``, holding those cells' values) are screened
with them: a record of a cell the screen withholds is dropped, so no later
request can route the subject back (``verdict`` is the same test, for
``framework.idmutation.routes``).

The event is not parked: a parked event keeps its bytes in the dead-letter
WAL, which is exactly the residue the erasure removed. Each drop is logged
(event id, agent table, subject hash prefix; never the value) and counted in
``suppressed``. The erasure's tombstones at ``MAX_VERSION`` shadow the same
writes in the store anyway; the screen is what keeps them out once a store
purges old tombstones (Cassandra after ``gc_grace_seconds``), and keeps
the subject's new events out for good.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from framework.core.events import Event
from framework.core.mutations import CellValue, Delete, LogState, Mutation, Upsert
from framework.erasure.declare import PersonalData
from framework.erasure.keyed import ErasureKeyError, erasure_key, subject_hash
from framework.erasure.tables import DENYLIST_TABLE
from framework.idmutation.routes import ROUTES_TABLE, Verdict, erased_records

__all__ = ["SubjectScreen", "ScreenHolder", "load_screen", "screen_verdict"]

log = logging.getLogger("framework.erasure")


class SubjectScreen:
    """Removes erased subjects' writes from mappings (see the module docstring)."""

    def __init__(self, declared: Sequence[PersonalData], key: bytes, hashes: Iterable[str]) -> None:
        self.key = key
        self.hashes = frozenset(hashes)
        self._by_table: dict[str, list[PersonalData]] = {}
        for d in declared:
            self._by_table.setdefault(d.table, []).append(d)
        self.suppressed = 0

    def _erased(
        self, d: PersonalData, cells: Mapping[str, CellValue], key: Mapping[str, CellValue]
    ) -> str | None:
        """The hash of an erased subject the write holds under ``d``, else None."""
        values = [v for c in d.columns for v in d.members(cells.get(c))]
        k = key.get(d.key_column) if d.key_column is not None else None
        if isinstance(k, str):
            values.append(d.norm(k))
        for value in values:
            h = subject_hash(self.key, d.kind, value)
            if h in self.hashes:
                return h
        return None

    def _screen(self, m: Mutation) -> tuple[Mutation | None, str | None]:
        decls = self._by_table.get(m.table)
        if not decls or isinstance(m, Delete):
            return m, None
        cells: Mapping[str, CellValue] = m.cells if isinstance(m, Upsert) else m.attrs
        for d in decls:
            h = self._erased(d, cells, m.key)
            if h is None:
                continue
            if d.erase is None:
                return None, h
            gone = set(d.erase) | set(d.columns)
            kept = {c: v for c, v in cells.items() if c not in gone}
            if isinstance(m, Upsert):
                return (Upsert(m.table, m.key, kept, m.version, m.ttl) if kept else None), h
            return LogState(m.table, m.key, m.state, m.at, m.event_id, m.version, kept), h
        return m, None

    def verdict(self, table: str, cells: Mapping[str, CellValue]) -> tuple[bool, frozenset[str]] | None:
        """What of a row of ``table`` holding ``cells`` must go: None when no erased subject is in
        its declared cells, else ``(whole row, columns)`` (``framework.idmutation.routes.Verdict``)."""
        found: tuple[bool, frozenset[str]] | None = None
        for d in self._by_table.get(table, ()):
            if self._erased(d, cells, {}) is None:
                continue
            whole, columns = found or (False, frozenset())
            found = (whole or d.erase is None, columns | set(d.erase or ()) | set(d.columns))
        return found

    def _records(self, mutations: list[Mutation]) -> list[Mutation]:
        """``mutations`` without the route records of cells ``verdict`` withholds."""
        records = [(m.key, m.cells.get("value")) for m in mutations
                   if m.table == ROUTES_TABLE.name and isinstance(m, Upsert)]  # fmt: skip
        if not records:
            return mutations
        withheld = erased_records(records, self.verdict)
        return [m for m in mutations if m.table != ROUTES_TABLE.name or not withheld(m.key)]

    def __call__(self, event: Event, mutations: list[Mutation]) -> list[Mutation]:
        """``mutations`` without the erased subjects' writes (the same list when none)."""
        if not self.hashes:
            return mutations
        out: list[Mutation] = []
        changed = False
        if any(m.table == ROUTES_TABLE.name for m in mutations):
            kept_records = self._records(mutations)
            changed = len(kept_records) != len(mutations)
            mutations = kept_records
        for m in mutations:
            kept, h = self._screen(m)
            if h is not None:
                changed = True
                self.suppressed += 1
                log.info("erasure screen: event %s: %s to %s %s for erased subject %s…", event.event_id,
                         "write kept without personal cells" if kept else "write dropped", m.table,
                         type(m).__name__, h[:12])  # fmt: skip
            if kept is not None:
                out.append(kept)
        return out if changed else mutations


async def load_screen(store: Any, app: Any, key: bytes | None) -> SubjectScreen | None:
    """The screen of ``app``'s deny-list in ``store`` now; None when the app declares no personal
    data or has erased nobody. ErasureKeyError when subjects are erased but no key is given
    (the screen could not recognise them: better stop than re-ingest them)."""
    declared = getattr(app, "personal_data", ())
    if not declared:
        return None
    rows = await store.read_partition(DENYLIST_TABLE.name, {"app": app.name})
    hashes = [str(r.key["subject"]) for r in rows]
    if not hashes:
        return None
    if key is None:
        raise ErasureKeyError(f"app {app.name} has erased subjects: set CONVERGE_ERASURE_KEY to screen them")
    return SubjectScreen(declared, key, hashes)


async def screen_verdict(store: Any, app: Any) -> Verdict | None:
    """The ``verdict`` of ``app``'s deny-list in ``store`` now, for ID mutation's re-routing (None:
    nobody erased); the key from ``CONVERGE_ERASURE_KEY``, required once subjects are erased."""
    screen = await load_screen(store, app, erasure_key(required=False))
    return None if screen is None else screen.verdict


class ScreenHolder:
    """The current screen of a worker, reloaded from the store by ``refresh`` (a timer calls it)."""

    def __init__(self, app: Any, key: bytes | None) -> None:
        self.app, self.key = app, key
        self.current: SubjectScreen | None = None

    async def refresh(self, store: Any) -> None:
        """Reload the deny-list; the counter of suppressed writes carries over."""
        before = self.current.suppressed if self.current is not None else 0
        screen = await load_screen(store, self.app, self.key)
        if screen is not None:
            screen.suppressed = before
        self.current = screen

    def __call__(self) -> SubjectScreen | None:
        return self.current
