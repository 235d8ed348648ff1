"""Apply a history's mutations to a store and read back what the oracle compares."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agents import reference_agents
from agents.engagement import current_engagement
from agents.event_types import topic_of
from agents.projection import project
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG, TABLES
from examples.activity_platform.oracle import (
    CellState,
    Divergence,
    Expected,
    compare_documents,
    compare_engagement,
    compare_rows,
    row_cells,
)
from framework.core.events import Event
from framework.core.mutations import Mutation
from stores.sqlite.engine import SqliteEngine

AGENTS = {a.topic: a for a in reference_agents()}


def mutations(event: Event) -> list[Mutation]:
    return list(AGENTS[topic_of(event.type)].handle(event))


def fresh_store() -> SqliteEngine:
    store = SqliteEngine(":memory:")
    for schema in TABLES:
        store.ensure_table(schema)
    return store


def apply_all(store: SqliteEngine, batches: Iterable[Sequence[Event]]) -> None:
    """Apply each batch of events' mutations in one store call (order inside a batch is irrelevant)."""
    for batch in batches:
        store.apply([m for e in batch for m in mutations(e)])


def divergences(expected: Expected, store: SqliteEngine) -> list[Divergence]:
    """Every difference between the oracle and the store (rows, logs, engagement, projected documents)."""
    hubs = {str(r.key["hub_id"]): r for r in store.scan(ACTIVITY_HUB.name)}
    logs: dict[tuple[str, int, str], dict[str, CellState]] = {
        (str(r.key["hub_id"]), int(r.key["at"]), str(r.key["event_id"])): row_cells(r)  # type: ignore[arg-type]
        for r in store.scan(ENGAGEMENT_LOG.name)
    }
    engaged: dict[str, tuple[str, int]] = {}
    for hub in {str(k[0]) for k in logs}:
        current = current_engagement(store.read_partition(ENGAGEMENT_LOG.name, {"hub_id": hub}))
        assert current is not None
        engaged[hub] = (current.state, current.version)
    docs: dict[str, tuple[dict[str, Any], int]] = {}
    for hub, row in hubs.items():
        doc_id, doc, version = project(
            row, current_engagement(store.read_partition(ENGAGEMENT_LOG.name, {"hub_id": hub}))
        )
        docs[doc_id] = (doc, version)
    return [
        *compare_rows(ACTIVITY_HUB.name, expected.hub_rows, {h: row_cells(r) for h, r in hubs.items()}),
        *compare_rows(ENGAGEMENT_LOG.name, expected.engagement_logs, logs),
        *compare_engagement(expected.engagement, engaged),
        *compare_documents(expected.documents, docs),
    ]
