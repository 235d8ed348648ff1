"""Helpers of the Spark tests: the reference app, populating, projecting and reading the embedded stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from examples.activity_platform.app import app as reference_app
from examples.activity_platform.oracle import CellState, hit_document, row_cells
from framework.app import App
from framework.core.events import Event
from framework.core.mutations import Mutation
from framework.runtime.mapping import map_event
from framework.runtime.projector import project_partition
from spark_batch.io import open_index
from stores.open import open_wide_store

#: The reference app as the jobs load it.
APP = "examples.activity_platform.app:app"
PROJECTION = reference_app.projection("activities")
HUB, LOG = (t.name for t in PROJECTION.tables)
TOMBSTONES = "document"  # noida-db keeps no delete tombstones

Rows = dict[Any, dict[str, CellState]]


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def unique_alias(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def mutations(event: Event, app: App = reference_app) -> list[Mutation]:
    """The event's mutations and version marks, as the stream and the backfill map it."""
    agent = app.route(event)
    return map_event(agent, event, app.views_of(agent))


async def populate(url: str, events: Iterable[Event], app: App = reference_app) -> None:
    """Apply the events' mutations directly (no Spark), as the stream would."""
    store = await open_wide_store(url)
    try:
        for t in app.tables:
            await store.ensure_table(t)
        batch = [m for e in events for m in mutations(e, app)]
        for i in range(0, len(batch), 500):
            await store.apply(batch[i : i + 500])
    finally:
        await store.close()


async def read_state(url: str) -> tuple[Rows, Rows]:
    """Hub rows and engagement log rows as the oracle compares them."""
    store = await open_wide_store(url)
    try:
        hubs = {str(r.key["hub_id"]): row_cells(r) async for r in store.scan(HUB)}
        logs = {
            (str(r.key["hub_id"]), int(r.key["at"]), str(r.key["event_id"])): row_cells(r)  # type: ignore[arg-type]
            async for r in store.scan(LOG)
        }
        return hubs, logs
    finally:
        await store.close()


async def project_all(url: str, es_url: str, alias: str, hubs: Iterable[str]) -> None:
    """Create ``alias`` and project every hub row into it directly (the projector's routine)."""
    index = open_index(es_url, TOMBSTONES)
    store = await open_wide_store(url)
    try:
        await index.ensure_index(alias, PROJECTION.mappings)
        for hub in hubs:
            await project_partition(store, index, PROJECTION, {"hub_id": hub}, alias=alias)
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


def check_reference(spark: Any, store_url: str, es_url: str, alias: str, **options: Any) -> Any:
    """``spark_batch.convergence.check`` of the reference app's projection under ``alias``
    (2 store shards, 2 index slices); ``options`` go to ``check``."""
    from spark_batch.convergence import check

    return check(
        spark, app=APP, alias=alias, store_url=store_url, es_url=es_url, tombstones=TOMBSTONES,
        shards=2, slices=2, **options,
    )  # fmt: skip
