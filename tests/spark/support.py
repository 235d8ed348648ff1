"""Helpers of the Spark tests: populate, project and read back the embedded stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agents import INDEX_MAPPINGS, TABLES, reference_agents
from agents.event_types import topic_of
from agents.indexer import project_hub
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from examples.activity_platform.oracle import CellState, hit_document, row_cells
from framework.core.events import Event
from framework.core.mutations import Mutation
from spark_batch.io import open_index
from stores.open import open_wide_store

AGENTS = {a.topic: a for a in reference_agents()}
TOMBSTONES = "document"  # noida-db keeps no delete tombstones

Rows = dict[Any, dict[str, CellState]]


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def unique_alias(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def mutations(event: Event) -> list[Mutation]:
    return list(AGENTS[topic_of(event.type)].handle(event))


async def populate(url: str, events: Iterable[Event]) -> None:
    """Apply the events' mutations directly (no Spark), as the stream would."""
    store = await open_wide_store(url)
    try:
        for t in TABLES:
            await store.ensure_table(t)
        batch = [m for e in events for m in mutations(e)]
        for i in range(0, len(batch), 500):
            await store.apply(batch[i : i + 500])
    finally:
        await store.close()


async def read_state(url: str) -> tuple[Rows, Rows]:
    """Hub rows and engagement log rows as the oracle compares them."""
    store = await open_wide_store(url)
    try:
        hubs = {str(r.key["hub_id"]): row_cells(r) async for r in store.scan(ACTIVITY_HUB.name)}
        logs = {
            (str(r.key["hub_id"]), int(r.key["at"]), str(r.key["event_id"])): row_cells(r)  # type: ignore[arg-type]
            async for r in store.scan(ENGAGEMENT_LOG.name)
        }
        return hubs, logs
    finally:
        await store.close()


async def project_all(url: str, es_url: str, alias: str, hubs: Iterable[str]) -> None:
    """Create ``alias`` and project every hub row into it directly (the indexer's routine)."""
    index = open_index(es_url, TOMBSTONES)
    store = await open_wide_store(url)
    try:
        await index.ensure_index(alias, INDEX_MAPPINGS)
        for hub in hubs:
            await project_hub(store, index, alias, hub)
    finally:
        await store.close()
        await index.close()


async def documents(es_url: str, alias: str) -> dict[str, tuple[dict[str, Any], int | None]]:
    """Every visible document of ``alias`` as the oracle compares them."""
    index = open_index(es_url, TOMBSTONES)
    try:
        await index.refresh(alias)
        return {h.doc_id: hit_document(h) async for h in index.scan(alias)}
    finally:
        await index.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)
