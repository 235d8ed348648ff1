"""The deny-list of record: every write of archived or replayed events into a store screens against it.

A backfill or an ingestion writes events that may hold subjects erased
since; a store that never saw the erasure (a fresh store, a rebuilt one)
has no deny-list, so its writes would bring them back. Before such a job
writes, ``adopt_denylist`` settles which deny-list it screens against:

- the app declares no personal data: nothing to screen;
- ``denylist_store`` (``--denylist-store``, ``CONVERGE_DENYLIST_STORE``)
  names the store of record and differs from the target: its entries (keyed
  hashes only, at their own versions) are copied into the target's
  deny-list, so the job's tasks, the target's workers and ``erase verify``
  on the target screen the same subjects; DenylistMissing when that store
  holds no deny-list;
- otherwise the target's own deny-list is the record: DenylistMissing when
  the target has none (a fresh store) and was not named as the store of
  record (``--denylist-store`` set to the target's own URL, or to
  ``target``, accepts it: the job creates an empty deny-list there).

``screen_of`` then gives a task the screen of the (adopted) deny-list.
"""

from __future__ import annotations

from typing import Any

from framework.core.errors import ConvergeError
from framework.core.mutations import Upsert
from framework.core.schema import SchemaError
from framework.core.sync import run_sync
from framework.erasure.keyed import erasure_key
from framework.erasure.screen import SubjectScreen, load_screen
from framework.erasure.tables import DENYLIST_TABLE

__all__ = ["TARGET", "DenylistMissing", "adopt_denylist", "screen_of"]

#: The ``denylist_store`` value that names the target store itself as the store of record.
TARGET = "target"
_FLAG = "--denylist-store (CONVERGE_DENYLIST_STORE)"


class DenylistMissing(ConvergeError, ValueError):
    """A job would write an app's personal data into a store with no deny-list of record."""


def _has_denylist(store: Any) -> bool:
    try:
        store.schema(DENYLIST_TABLE.name)
    except SchemaError:
        return False
    return True


async def _adopt(app: Any, target_url: str, named: str | None) -> int:
    from stores.open import open_wide_store

    target = await open_wide_store(target_url)
    try:
        if named in (None, TARGET, target_url):
            if named is None and not _has_denylist(target):
                raise DenylistMissing(
                    f"app {app.name} declares personal data and store {target_url} has no erasure deny-list:"
                    f" writing into it could restore erased subjects; name the store of record with {_FLAG}"
                    f" (the target's own URL, or {TARGET}, when it is the store of record)"
                )
            await target.ensure_table(DENYLIST_TABLE)
            return len(await target.read_partition(DENYLIST_TABLE.name, {"app": app.name}))
        source = await open_wide_store(named)
        try:
            if not _has_denylist(source):
                raise DenylistMissing(f"{_FLAG}: store {named} holds no erasure deny-list of app {app.name}")
            rows = await source.read_partition(DENYLIST_TABLE.name, {"app": app.name})
        finally:
            await source.close()
        await target.ensure_table(DENYLIST_TABLE)
        copies = [Upsert(DENYLIST_TABLE.name, dict(r.key), r.values(), r.version) for r in rows]
        if copies:
            await target.apply(copies)
        return len(copies)
    finally:
        await target.close()


def adopt_denylist(app: Any, target_url: str, denylist_store: str | None = None) -> int:
    """Settle the deny-list a job writing into ``target_url`` screens against (see the module
    docstring; ``denylist_store`` None: the setting); how many subjects it holds. DenylistMissing
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
            if not _has_denylist(store):
                return None
            return await load_screen(store, app, key or erasure_key(required=False))
        finally:
            await store.close()

    return run_sync(load())
