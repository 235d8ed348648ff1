"""Where each view's documents go, by alias: an aggregate's to its contributions, the others to the index.

The jobs that re-project entities (retention, ID mutation) take one ``SearchIndex`` and an
app's views (``App.views``: projections and aggregates); ``ViewTargets`` routes each alias.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from framework.aggregates.contributions import ContributionIndex
from stores.base import BulkResult, IndexOp, SearchHit, SearchIndex

__all__ = ["ViewTargets"]


class ViewTargets(SearchIndex):
    """``contributions`` for its aggregates' aliases, ``index`` (None: no index) for every other alias."""

    def __init__(self, index: SearchIndex | None, contributions: ContributionIndex) -> None:
        self.search_index, self.contributions = index, contributions

    def _for(self, alias: str) -> SearchIndex:
        if alias in self.contributions.aggregates:
            return self.contributions
        if self.search_index is None:
            raise RuntimeError(f"no index to write the documents of {alias!r} into")
        return self.search_index

    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        return await self._for(alias).ensure_index(alias, mappings, generation)

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        return await self._for(alias).index(alias, doc_id, doc, version)

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        return await self._for(alias).delete(alias, doc_id, version)

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        return await self._for(alias).bulk(alias, ops)

    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        return await self._for(alias).get(alias, doc_id)

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        return await self._for(alias).search(alias, query, size)

    def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        return self._for(alias).scan(alias, slice_id=slice_id, slices=slices, page_size=page_size)

    async def refresh(self, alias: str) -> None:
        await self._for(alias).refresh(alias)

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        return await self._for(alias).swap_alias(alias, new_index)

    async def close(self) -> None:
        """Close nothing: the index and the contributions belong to whoever opened them."""
