"""What a worker opens for an app: the wide-column store, the search index, the dead-letter WAL.

A worker starts while its search index is down: when Elasticsearch does not answer at start
(``ensure_index`` fails transiently), the index is ensured in the background instead, probed
every ``probe_interval`` s (the app's ``BackoffConfig``), and until it is, every request on an
alias fails transiently (``IndexNotEnsured``): the projectors' writes block and pause as in any
index outage, nothing is parked, and the agents write the store on. A permanent failure of
``ensure_index`` at start still stops the worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from framework.app import App
from framework.dlq import DeadLetterWAL
from framework.dlq.offload import open_objects
from framework.settings import Settings
from stores.base import BulkResult, IndexOp, SearchHit, SearchIndex, WideColumnStore
from stores.errors import TransientStoreError
from stores.identity import ensure_store_identity, pair_index, source_of, with_source
from stores.open import open_search_index, open_wide_store

__all__ = ["Resources", "EnsuredIndex", "IndexNotEnsured"]

log = logging.getLogger(__name__)

#: Seconds between the warnings that the index is still not ensured.
_WARN_EVERY = 30.0


class IndexNotEnsured(TransientStoreError):
    """A request on an alias of an index the worker has not ensured yet (retry later)."""


class EnsuredIndex(SearchIndex):
    """The worker's search index: ``inner``, with every request on an alias refused
    (``IndexNotEnsured``, transient) until ``ready`` (the app's indices and aliases exist),
    so that no write reaches a missing alias (a permanent error: the event would be parked).
    Other attributes are ``inner``'s."""

    def __init__(self, inner: SearchIndex) -> None:
        self.inner = inner
        self.ready = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self, alias: str) -> None:
        if not self.ready:
            raise IndexNotEnsured(f"{alias}: not ensured yet (no answer since the worker started)")

    async def answers(self, timeout: float = 1.0) -> bool:
        """The health probe: True once the indices are ensured and the cluster answers."""
        probe = getattr(self.inner, "answers", None)
        return self.ready and (probe is None or bool(await probe(timeout)))

    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        return await self.inner.ensure_index(alias, mappings, generation)

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        self._check(alias)
        return await self.inner.index(alias, doc_id, doc, version)

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        self._check(alias)
        return await self.inner.delete(alias, doc_id, version)

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        self._check(alias)
        return await self.inner.bulk(alias, ops)

    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        self._check(alias)
        return await self.inner.get(alias, doc_id)

    async def get_many(self, alias: str, doc_ids: Sequence[str]) -> list[SearchHit | None]:
        self._check(alias)
        return await self.inner.get_many(alias, doc_ids)

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        self._check(alias)
        return await self.inner.search(alias, query, size)

    async def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        self._check(alias)
        async for hit in self.inner.scan(alias, slice_id=slice_id, slices=slices, page_size=page_size):
            yield hit

    async def refresh(self, alias: str) -> None:
        self._check(alias)
        await self.inner.refresh(alias)

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        self._check(alias)
        return await self.inner.swap_alias(alias, new_index)

    async def close(self) -> None:
        await self.inner.close()


class Resources:
    """Opens, ensures and closes an app's store, index, ledger and WAL, in that order."""

    def __init__(self, app: App, settings: Settings) -> None:
        if app.projections and not settings.es_url:
            names = [p.name for p in app.projections]
            raise ValueError(f"app {app.name} has projections {names}: set es_url (CONVERGE_ES_URL)")
        self.app, self.settings = app, settings
        self._store: WideColumnStore | None = None
        self._index: EnsuredIndex | None = None
        self._ensuring: asyncio.Task[None] | None = None
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
    def index_ready(self) -> bool:
        """True when the app has no projections or their indices are ensured."""
        return self._index is None or self._index.ready

    @property
    def dlq(self) -> DeadLetterWAL | None:
        """The dead-letter WAL, or None before ``open``."""
        return self._dlq

    async def open(self) -> None:
        """Open everything and ensure every declared table and index (idempotent); an index
        that does not answer is ensured in the background (see the module docstring)."""
        s = self.settings
        self._store = await open_wide_store(s.wide_store, writer=s.store_writer)
        for schema in self.app.tables:
            await self._store.ensure_table(schema)
        if self.app.delivery is not None:
            from framework.delivery.ledger import DeliveryLedger

            self.ledger = DeliveryLedger(self._store, self.app.delivery)
            await self.ledger.ensure()
        if self.app.projections:
            assert s.es_url is not None
            self._index = EnsuredIndex(open_search_index(s.es_url, s.es_tombstones))
            try:
                await self._ensure_indices(self._index)
            except TransientStoreError as exc:
                log.warning("the search index does not answer (%s): starting without it; the projections "
                            "wait, paused, until its indices are ensured", exc)  # fmt: skip
                self._ensuring = asyncio.ensure_future(self._ensure_in_background(self._index))
        self._dlq = DeadLetterWAL(s.dlq_root, objects=open_objects(s), durability=s.dlq_durability)

    async def _ensure_indices(self, index: EnsuredIndex) -> None:
        # each index records the store it is built from, so that a repair from another refuses
        identity = await ensure_store_identity(self.store, self.app.name)  # stores.identity
        source = source_of(identity, self.settings.wide_store)
        for p in self.app.projections:
            await index.ensure_index(p.alias, with_source(p.mappings, source))
            await pair_index(index, p.alias, identity, self.settings.wide_store)
        index.ready = True

    async def _ensure_in_background(self, index: EnsuredIndex) -> None:
        """Probe the cluster every ``probe_interval`` s; once it answers, ensure the indices (again
        on a transient failure). Any other failure is logged and retried at the warning period."""
        backoff = self.app.runtime.scheduler.backoff
        probe = getattr(index.inner, "answers", None)
        started = warned = time.monotonic()
        while True:
            await asyncio.sleep(backoff.probe_interval)
            if probe is not None and not await probe(backoff.probe_timeout):
                if time.monotonic() - warned >= _WARN_EVERY:
                    warned = time.monotonic()
                    log.warning("the search index still does not answer after %.0f s: the projections wait",
                                warned - started)  # fmt: skip
                continue
            try:
                await self._ensure_indices(index)
            except TransientStoreError as exc:
                log.info("ensuring the search index failed again: %s", exc)
                continue
            except Exception:  # noqa: BLE001 - a refusal (bad mappings...): an operator must look
                log.exception("cannot ensure the search index; retrying in %.0f s", _WARN_EVERY)
                await asyncio.sleep(_WARN_EVERY)
                continue
            log.warning("search index ensured %.1f s after the start: the projections resume",
                        time.monotonic() - started)  # fmt: skip
            return

    async def close(self) -> None:
        """Close what is open, the WAL last (parking may happen until the agents stopped)."""
        if self._ensuring is not None:
            self._ensuring.cancel()
            await asyncio.gather(self._ensuring, return_exceptions=True)
            self._ensuring = None
        if self._index is not None:
            await self._index.close()
            self._index = None
        if self._store is not None:
            await self._store.close()
            self._store = None
        if self._dlq is not None:
            self._dlq.close()
            self._dlq = None
