"""The worker's erasure deny-list of record (``framework.erasure.record``): settled before it consumes.

A worker of an app that declares personal data runs ``settle`` on its store
when it starts, before the first event: a store with no established
deny-list (fresh, rebuilt, or with only the tables a worker created) is
refused unless ``CONVERGE_DENYLIST_STORE`` names the store of record, whose
deny-list is then copied in (and the store's own entries copied out), so a
worker replaying its topics into a rebuilt store screens every subject erased
before. With a store of record elsewhere it settles again every ``every``
seconds: erasures run on either store reach the other (the worker's screen
reloads its own store every 5 s). The store of record stays open meanwhile.
"""

from __future__ import annotations

import logging
from typing import Any

from framework.app import App
from framework.settings import Settings

__all__ = ["DenylistSettler", "denylist_settler"]

log = logging.getLogger("framework.erasure")


class DenylistSettler:
    """Settles ``app``'s deny-list in the worker's store (see the module docstring)."""

    def __init__(self, app: App, settings: Settings) -> None:
        from framework.erasure.record import TARGET

        self.app, self.url, self.named = app, settings.wide_store, settings.denylist_store
        self.elsewhere = self.named not in (None, TARGET, self.url)
        self._source: Any = None

    async def start(self, store: Any) -> int:
        """Settle before the worker consumes; DenylistMissing (the worker does not start) when the
        store has no deny-list to screen against. How many subjects it holds."""
        from framework.erasure.record import settle

        if self.elsewhere and self._source is None:
            from stores.open import open_wide_store

            assert self.named is not None
            self._source = await open_wide_store(self.named)
        return await settle(self.app, store, self.url, self.named, source=self._source)

    async def again(self, store: Any) -> None:
        """The periodic merge with the store of record (a failure is logged; the next one retries)."""
        if not self.elsewhere:
            return
        try:
            await self.start(store)
        except Exception as exc:  # a store of record unreachable for a while
            log.warning("erasure deny-list: merging with the store of record failed: %s", exc)

    async def close(self) -> None:
        if self._source is not None:
            source, self._source = self._source, None
            await source.close()


def denylist_settler(app: App, worker: Any, settings: Settings, resources: Any, every: float = 60.0) -> Any:
    """The settler of an app that declares personal data (None otherwise), its merge with a store of
    record elsewhere on a timer of ``worker``."""
    if not app.personal_data:
        return None
    settler = DenylistSettler(app, settings)
    if settler.elsewhere:

        @worker.timer(every, name="converge.erasure.denylist")
        async def merge() -> None:
            try:
                store = resources.store
            except RuntimeError:  # not open yet, or closed
                return
            await settler.again(store)

    return settler
