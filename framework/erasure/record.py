"""The deny-list of record: every write of archived or replayed events into a store screens against it.

A backfill, an ingestion or a worker replaying its topics writes events that
may hold subjects erased since; a store that never saw the erasure (a fresh
store, a rebuilt one, or one whose tables a worker or the test kit created:
its deny-list table exists but is empty) would bring them back. So an empty
deny-list table proves nothing: a store's deny-list is *established* when
the store carries the marker row of ``converge_erasure_record`` (written
when a deny-list is adopted, copied in or named there) or holds entries (an
erasure ran there). Before writing, every writer runs ``settle`` (the
backfill and ingestion through ``adopt_denylist``, a worker when it starts
and every minute after: ``framework.worker.denylist``):

- the app declares no personal data: nothing to screen;
- ``denylist_store`` (``--denylist-store``, ``CONVERGE_DENYLIST_STORE``)
  names another store, the store of record: the two deny-lists are merged
  both ways (keyed hashes only, each entry at its own version: copies are
  idempotent and an entry is never removed), so the job's tasks, the
  target's workers and ``erase verify`` on the target screen the same
  subjects, and an erasure run on the target reaches the record. The target
  is marked ``replica``, a record that had no marker ``record``. When
  neither holds an established deny-list, the named store becomes the
  record, empty (a new deployment: the operator named it; logged at
  warning), since a deny-list kept apart from the target is what outlives
  a rebuilt target;
- ``denylist_store`` is ``target`` or the target's own URL: the target is
  the store of record; marked ``record`` (an empty deny-list when new);
- no ``denylist_store``: the target's own deny-list, DenylistMissing unless
  it is established (a store with entries but no marker, written before
  the marker existed, is marked ``record``).

``screen_of`` then gives a task the screen of the (settled) deny-list.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.errors import ConvergeError
from framework.core.mutations import Mutation, Upsert
from framework.core.schema import SchemaError
from framework.core.sync import run_sync
from framework.erasure.keyed import erasure_key
from framework.erasure.screen import SubjectScreen, load_screen
from framework.erasure.tables import DENYLIST_TABLE, RECORD_TABLE

__all__ = ["TARGET", "RECORD", "REPLICA", "DenylistMissing", "Denylist", "adopt_denylist", "read_denylist",
           "settle", "screen_of"]  # fmt: skip

log = logging.getLogger("framework.erasure")

#: The ``denylist_store`` value that names the target store itself as the store of record.
TARGET = "target"
#: The roles a marker gives its store: the store of record, or a store screened from it.
RECORD, REPLICA = "record", "replica"
_FLAG = "--denylist-store (CONVERGE_DENYLIST_STORE)"


class DenylistMissing(ConvergeError, ValueError):
    """A writer would write an app's personal data into a store with no deny-list of record."""


@dataclass(frozen=True)
class Denylist:
    """An app's deny-list in one store: its entries and its marker's role (None: no marker)."""

    entries: tuple[Any, ...]
    role: str | None

    @property
    def established(self) -> bool:
        """True when the store's deny-list can be trusted: marked, or holding entries."""
        return self.role is not None or bool(self.entries)

    def subjects(self) -> set[str]:
        return {str(r.key["subject"]) for r in self.entries}


def _has(store: Any, name: str) -> bool:
    try:
        store.schema(name)
    except SchemaError:
        return False
    return True


async def read_denylist(store: Any, app: Any) -> Denylist:
    """``app``'s deny-list in ``store`` (no table is created by reading it)."""
    entries = await store.read_partition(DENYLIST_TABLE.name, {"app": app.name}) if _has(
        store, DENYLIST_TABLE.name) else []  # fmt: skip
    marker = (
        await store.read_row(RECORD_TABLE.name, {"app": app.name}) if _has(store, RECORD_TABLE.name) else None
    )
    role = marker.values().get("role") if marker is not None else None
    return Denylist(tuple(entries), str(role) if role is not None else None)


async def _write(store: Any, app: Any, have: Denylist, copies: Sequence[Any], role: str, clock: Any) -> None:
    """Write the ``copies`` of entries ``store`` lacks, and its marker when it has none, in one apply."""
    writes: list[Mutation] = [Upsert(DENYLIST_TABLE.name, dict(r.key), r.values(), r.version) for r in copies]
    if have.role is None:
        at = int(clock() * 1_000_000)
        writes.append(Upsert(RECORD_TABLE.name, {"app": app.name}, {"role": role, "established_at": at}, at))
    if writes:
        await store.ensure_table(DENYLIST_TABLE)
        await store.ensure_table(RECORD_TABLE)
        await store.apply(writes)


async def settle(
    app: Any, target: Any, target_url: str, named: str | None, *, source: Any = None, clock: Any = time.time
) -> int:
    """Settle the deny-list ``target`` (at ``target_url``) screens against (the module docstring);
    how many subjects it holds. ``source``: the store ``named`` already open (else opened and
    closed here). DenylistMissing (one line) when there is none to screen against."""
    if not getattr(app, "personal_data", ()):
        return 0
    mine = await read_denylist(target, app)
    if named in (None, TARGET, target_url):
        if named is None and not mine.established:
            raise DenylistMissing(
                f"app {app.name} declares personal data and store {target_url} has no erasure deny-list"
                f" of record (an empty deny-list table is not one): writing into it could restore erased"
                f" subjects; name the store of record with {_FLAG} ({TARGET} when it is this store)"
            )
        await _write(target, app, mine, (), RECORD, clock)
        return len(mine.entries)
    assert named is not None
    if source is None:
        from stores.open import open_wide_store

        opened = await open_wide_store(named)
        try:
            return await settle(app, target, target_url, named, source=opened, clock=clock)
        finally:
            await opened.close()
    theirs = await read_denylist(source, app)
    if not (theirs.established or mine.established):  # a new deployment, or a new store of record
        log.warning("erasure deny-list: store %s is named the store of record of app %s and holds none:"
                    " it becomes the record, empty", named, app.name)  # fmt: skip
    here, there = mine.subjects(), theirs.subjects()
    await _write(
        source, app, theirs, [r for r in mine.entries if str(r.key["subject"]) not in there], RECORD, clock
    )
    await _write(
        target, app, mine, [r for r in theirs.entries if str(r.key["subject"]) not in here], REPLICA, clock
    )
    return len(here | there)


async def _adopt(app: Any, target_url: str, named: str | None) -> int:
    from stores.open import open_wide_store

    target = await open_wide_store(target_url)
    try:
        return await settle(app, target, target_url, named)
    finally:
        await target.close()


def adopt_denylist(app: Any, target_url: str, denylist_store: str | None = None) -> int:
    """Settle the deny-list a job writing into ``target_url`` screens against (``settle``;
    ``denylist_store`` None: the setting); how many subjects it holds. DenylistMissing
    (one line) when there is none to screen against."""
    if not getattr(app, "personal_data", ()):
        return 0
    if denylist_store is None:
        from framework.settings import Settings

        denylist_store = Settings.resolve(app.name).denylist_store
    return run_sync(_adopt(app, target_url, denylist_store))


def screen_of(app: Any, store_url: str, key: bytes | None = None) -> SubjectScreen | None:
    """The screen of ``app``'s deny-list in ``store_url`` now (``key`` None: ``CONVERGE_ERASURE_KEY``);
    None when the app declares no personal data or erased nobody."""
    if not getattr(app, "personal_data", ()):
        return None

    async def load() -> SubjectScreen | None:
        from stores.open import open_wide_store

        store = await open_wide_store(store_url)
        try:
            if not _has(store, DENYLIST_TABLE.name):
                return None
            return await load_screen(store, app, key or erasure_key(required=False))
        finally:
            await store.close()

    return run_sync(load())
