"""The indexer: projects changed hub rows into the search index.

It consumes the change feed (``row_changed`` events keyed by the hub row's
ordering key), so one entity's reads and index writes are serial. For each
change it reads the merged hub row and its engagement log and writes the whole
document at ``version = max write time`` (``external_gte``), or deletes it
when the row has no live cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agents.engagement import current_engagement
from agents.projection import INDEX_ALIAS, project
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from framework.events import Event, EventError
from framework.mutations import Mutation
from framework.runtime.agent import KeyedAgent
from stores.base import SearchIndex, WideColumnStore

__all__ = ["IndexerAgent", "ProjectionSink", "TOPIC_CHANGES", "changed_hub_id"]

#: The change feed the hub-writing agents announce to.
TOPIC_CHANGES = "activity-changes"
_TABLES = (ACTIVITY_HUB.name, ENGAGEMENT_LOG.name)


def changed_hub_id(event: Event) -> str:
    """The hub row a ``row_changed`` event is about; EventError when it is not one."""
    if event.type != "row_changed":
        raise EventError("type", f"expected row_changed, got {event.type!r}")
    table, key = event.payload.get("table"), event.payload.get("key")
    if table not in _TABLES:
        raise EventError("payload.table", f"not a projected table: {table!r}")
    if not isinstance(key, Mapping) or not isinstance(key.get("hub_id"), str) or not key["hub_id"]:
        raise EventError("payload.key.hub_id", "missing or not a string")
    return key["hub_id"]


class IndexerAgent(KeyedAgent):
    """Validates change events; the projection itself is its sink (it reads the store)."""

    name = "indexer"
    topic = TOPIC_CHANGES

    def handle(self, event: Event) -> Iterable[Mutation]:
        changed_hub_id(event)
        return ()


class ProjectionSink:
    """Reads the merged row and its engagement log, then indexes or deletes the document."""

    name = "projection"

    def __init__(self, store: WideColumnStore, index: SearchIndex, alias: str = INDEX_ALIAS) -> None:
        self.store, self.index, self.alias = store, index, alias

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        hub_id = changed_hub_id(event)
        await project_hub(self.store, self.index, self.alias, hub_id, event.version)


async def project_hub(
    store: WideColumnStore, index: SearchIndex, alias: str, hub_id: str, change_version: int = 0
) -> tuple[str, int, dict[str, Any] | None]:
    """Project one hub row now; returns (action, version, document)."""
    row = await store.read_row(ACTIVITY_HUB.name, {"hub_id": hub_id})
    log = await store.read_partition(ENGAGEMENT_LOG.name, {"hub_id": hub_id})
    engagement = current_engagement(log)
    if row is None:
        # The document version never exceeds max(shadowed cells, log), so this delete wins.
        version = max(change_version, engagement.version if engagement else 0)
        await index.delete(alias, hub_id, version)
        return "delete", version, None
    doc_id, doc, version = project(row, engagement)
    await index.index(alias, doc_id, doc, version)
    return "index", version, doc
