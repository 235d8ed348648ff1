"""The platform's search projection, as the batch jobs compute it.

The projection itself is ``agents.projection.project`` (with
``agents.engagement.current_engagement``), the same code the indexer runs;
this module only feeds it rows. A document depends on one hub row and its
engagement log, and both tables are partitioned by ``hub_id``: a scan shard
(partition hash on SQLite, token range on Cassandra) therefore holds a hub
row together with its whole log, so each shard is projected on its own,
without a shuffle. A shard's engagement logs are reduced to their current
state first; its hub rows then stream through the projection.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from agents.engagement import Engagement, current_engagement
from agents.projection import project
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from framework.core.mutations import Mutation
from framework.core.rows import Row
from spark_batch.codec import digest, record_to_row
from spark_batch.io import iterate_async, pages
from stores.base import WideColumnStore
from stores.open import open_wide_store

__all__ = [
    "HUB_TABLE",
    "LOG_TABLE",
    "PROJECTED_TABLES",
    "Document",
    "hub_of",
    "document",
    "shard_documents",
    "expected_task",
    "records_expected_task",
]

HUB_TABLE = ACTIVITY_HUB.name
LOG_TABLE = ENGAGEMENT_LOG.name
#: Tables a document is built from; they share the partition key, so their shards line up.
PROJECTED_TABLES = (HUB_TABLE, LOG_TABLE)
if ACTIVITY_HUB.partition_key != ENGAGEMENT_LOG.partition_key:  # pragma: no cover - a schema change
    raise RuntimeError("hub rows and engagement logs must share their partition key")

#: ``(doc_id, document, version)``, as ``agents.projection.project`` returns it.
Document = tuple[str, dict[str, Any], int]


def hub_of(mutation: Mutation) -> str | None:
    """The hub row whose document ``mutation`` may change, or None."""
    if mutation.table in PROJECTED_TABLES:
        return str(mutation.key["hub_id"])
    return None


def document(row: Row | None, log: Iterable[Row]) -> Document | None:
    """The document of a hub row and its log, or None when the row has no live cell."""
    if row is None or not row.cells:
        return None
    return project(row, current_engagement(log))


async def _engagement(store: WideColumnStore, shard: int, shards: int) -> dict[str, Engagement]:
    logs: dict[str, list[Row]] = {}
    async for row in store.scan(LOG_TABLE, shard=shard, shards=shards):
        logs.setdefault(str(row.key["hub_id"]), []).append(row)
    return {hub: e for hub, rows in logs.items() if (e := current_engagement(rows)) is not None}


async def shard_documents(store: WideColumnStore, shard: int, shards: int) -> AsyncIterator[Document]:
    """The documents of every hub row in one scan shard, streamed."""
    engagement = await _engagement(store, shard, shards)
    async for row in store.scan(HUB_TABLE, shard=shard, shards=shards):
        if row.cells:
            yield project(row, engagement.get(str(row.key["hub_id"])))


async def _digest_pages(store_url: str, shard: int, shards: int) -> AsyncIterator[list[tuple[str, int, str]]]:
    store = await open_wide_store(store_url)
    try:
        async for page in pages(shard_documents(store, shard, shards)):
            yield [(doc_id, version, digest(doc)) for doc_id, doc, version in page]
    finally:
        await store.close()


def expected_task(store_url: str, shards: int, part: Iterable[int]) -> Iterator[tuple[str, int, str]]:
    """Executor: ``(doc_id, version, digest)`` of every document of the given shards."""
    for shard in part:
        for page in iterate_async(lambda: _digest_pages(store_url, shard, shards)):  # noqa: B023
            yield from page


def records_expected_task(part: Iterable[Any]) -> Iterator[tuple[str, int, str]]:
    """Executor: the same from row records sorted by ``pk`` (consecutive records of a hub)."""
    for _, records in itertools.groupby(part, key=lambda r: r["pk"]):
        hub: Row | None = None
        log: list[Row] = []
        for r in records:
            row = record_to_row(r["key"], r["cells"])
            if r["table"] == HUB_TABLE:
                hub = row
            elif r["table"] == LOG_TABLE:
                log.append(row)
        if (d := document(hub, log)) is not None:
            yield d[0], d[2], digest(d[1])
