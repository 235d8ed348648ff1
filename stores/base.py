"""The store contracts: a wide-column store and a search index.

The runtime talks to stores only through these interfaces (async). The batch
layer wraps them with ``framework.core.sync.run_sync`` where it needs blocking calls.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.mutations import CellValue, Mutation
from framework.core.rows import Row
from framework.core.schema import TableSchema

__all__ = [
    "WideColumnStore",
    "SearchIndex",
    "IndexOp",
    "BulkItem",
    "BulkResult",
    "SearchHit",
]


class WideColumnStore(abc.ABC):
    """Per-cell last-write-wins rows with clustering, tombstones and TTL."""

    @abc.abstractmethod
    async def ensure_table(self, schema: TableSchema) -> None:
        """Create the table if missing and remember its schema."""

    @abc.abstractmethod
    def schema(self, table: str) -> TableSchema:
        """The declared schema of ``table``; raises SchemaError when undeclared."""

    @abc.abstractmethod
    async def apply(self, mutations: Sequence[Mutation]) -> None:
        """Apply mutations; durable when this returns. Order inside the batch is irrelevant."""

    @abc.abstractmethod
    async def read_row(self, table: str, key: Mapping[str, CellValue]) -> Row | None:
        """The row at the full primary ``key``; None when it has no live cell."""

    @abc.abstractmethod
    async def read_partition(
        self,
        table: str,
        partition_key: Mapping[str, CellValue],
        *,
        start: Sequence[CellValue] | None = None,
        end: Sequence[CellValue] | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[Row]:
        """Rows of one partition in clustering order (declared order, or its reverse).

        ``start`` and ``end`` are inclusive bounds on a prefix of the
        clustering key, compared in natural (ascending) column order.
        """

    async def read_rows(self, table: str, keys: Sequence[Mapping[str, CellValue]]) -> list[Row | None]:
        """``read_row`` of each key, in order (adapters override it with fewer round trips)."""
        return list(await asyncio.gather(*(self.read_row(table, k) for k in keys)))

    async def read_partitions(
        self, table: str, partition_keys: Sequence[Mapping[str, CellValue]]
    ) -> list[list[Row]]:
        """``read_partition`` of each partition key, in order (adapters override it with fewer
        round trips)."""
        return list(await asyncio.gather(*(self.read_partition(table, k) for k in partition_keys)))

    @abc.abstractmethod
    def scan(self, table: str, *, shard: int = 0, shards: int = 1) -> AsyncIterator[Row]:
        """Every live row of ``table`` whose partition falls in shard ``shard`` of ``shards``.

        The shards partition the table: each row is in exactly one of them.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and threads."""

    async def __aenter__(self) -> WideColumnStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass(frozen=True)
class IndexOp:
    """One bulk item: index ``doc`` (or delete when ``doc`` is None) at ``version``."""

    doc_id: str
    version: int
    doc: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class BulkItem:
    """The outcome of one bulk item: ``ok``, ``stale`` (already newer) or ``error``."""

    doc_id: str
    outcome: str
    status: int
    retryable: bool = False
    reason: str | None = None


@dataclass
class BulkResult:
    items: list[BulkItem] = field(default_factory=list)

    @property
    def failed(self) -> list[BulkItem]:
        return [i for i in self.items if i.outcome == "error"]

    @property
    def retryable(self) -> list[BulkItem]:
        return [i for i in self.failed if i.retryable]

    @property
    def permanent(self) -> list[BulkItem]:
        return [i for i in self.failed if not i.retryable]


@dataclass(frozen=True)
class SearchHit:
    doc_id: str
    version: int | None
    source: Mapping[str, Any]


class SearchIndex(abc.ABC):
    """Whole-document writes under external versions behind an alias."""

    @abc.abstractmethod
    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        """Create ``{alias}-v{generation}`` if missing, point ``alias`` at it when unset."""

    @abc.abstractmethod
    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        """Write the whole document at ``version``; False when the index already holds newer."""

    @abc.abstractmethod
    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        """Delete at ``version``; False when the index already holds newer."""

    @abc.abstractmethod
    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        """Apply many writes; per-item outcomes, never raising for item errors."""

    @abc.abstractmethod
    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        """The stored document and its version, or None."""

    async def get_many(self, alias: str, doc_ids: Sequence[str]) -> list[SearchHit | None]:
        """``get`` of each of ``doc_ids``, in order (an adapter answers them with one request)."""
        return [await self.get(alias, doc_id) for doc_id in doc_ids]

    @abc.abstractmethod
    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        """Documents matching a query DSL ``query`` (match_all when None)."""

    @abc.abstractmethod
    def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        """Every document in slice ``slice_id`` of ``slices``; the slices partition the index."""

    @abc.abstractmethod
    async def refresh(self, alias: str) -> None:
        """Make recent writes visible to search."""

    @abc.abstractmethod
    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        """Point ``alias`` at ``new_index`` atomically; return the indices it left."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the client."""
