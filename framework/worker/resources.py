"""What a worker opens for an app: the wide-column store, the search index, the dead-letter WAL."""

from __future__ import annotations

import logging
from typing import Any

from framework.app import App
from framework.dlq import DeadLetterWAL
from framework.dlq.offload import open_objects
from framework.settings import Settings
from stores.base import SearchIndex, WideColumnStore
from stores.open import open_search_index, open_wide_store

__all__ = ["Resources"]

log = logging.getLogger(__name__)


class Resources:
    """Opens, ensures and closes an app's store, index, ledger and WAL, in that order."""

    def __init__(self, app: App, settings: Settings) -> None:
        if app.projections and not settings.es_url:
            names = [p.name for p in app.projections]
            raise ValueError(f"app {app.name} has projections {names}: set es_url (CONVERGE_ES_URL)")
        self.app, self.settings = app, settings
        self._store: WideColumnStore | None = None
        self._index: SearchIndex | None = None
        self._dlq: DeadLetterWAL | None = None
        self.ledger: Any | None = None

    @property
    def store(self) -> WideColumnStore:
        if self._store is None:
            raise RuntimeError("the store is not open yet")
        return self._store

    @property
    def index(self) -> SearchIndex:
        if self._index is None:
            raise RuntimeError("the app has no index open")
        return self._index

    @property
    def dlq(self) -> DeadLetterWAL | None:
        """The dead-letter WAL, or None before ``open``."""
        return self._dlq

    async def open(self) -> None:
        """Open everything and ensure every declared table and index (idempotent)."""
        s = self.settings
        self._store = await open_wide_store(s.wide_store)
        for schema in self.app.tables:
            await self._store.ensure_table(schema)
        if self.app.delivery is not None:
            from framework.delivery.ledger import DeliveryLedger

            self.ledger = DeliveryLedger(self._store, self.app.delivery)
            await self.ledger.ensure()
        if self.app.projections:
            assert s.es_url is not None
            self._index = open_search_index(s.es_url, s.es_tombstones)
            for p in self.app.projections:
                await self._index.ensure_index(p.alias, p.mappings)
        self._dlq = DeadLetterWAL(s.dlq_root, objects=open_objects(s), durability=s.dlq_durability)

    async def close(self) -> None:
        """Close what is open, the WAL last (parking may happen until the agents stopped)."""
        if self._index is not None:
            await self._index.close()
            self._index = None
        if self._store is not None:
            await self._store.close()
            self._store = None
        if self._dlq is not None:
            self._dlq.close()
            self._dlq = None
