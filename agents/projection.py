"""The search projection of the activity platform: one document per hub row.

The document is built from the *merged* hub row (never from one event), plus
the current engagement state derived from the row's engagement log; both
tables are partitioned by ``hub_id``. The framework writes it at the
partition's version mark (see ``framework.Projection``).

Only live cells appear (absent fields are omitted, never null). A row with
live cells but no main record (insights that arrived first, or survived a
cancellation) is indexed with ``has_record: false``; timelines filter on it.
A hub row with no live cell has no document, whatever its log holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from agents.engagement import current_engagement
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG, split_addresses
from framework import Projection, Row, TableSchema

__all__ = ["INDEX_ALIAS", "INDEX_MAPPINGS", "ActivityProjection"]

#: Alias the activity documents are indexed under.
INDEX_ALIAS = "activities"

_KEYWORD = {"type": "keyword"}
#: Elasticsearch mappings of the activity documents (times are integer microseconds).
INDEX_MAPPINGS: dict[str, Any] = {
    "properties": {
        "hub_id": _KEYWORD,
        "org_id": _KEYWORD,
        "source": _KEYWORD,
        "external_id": _KEYWORD,
        "kind": _KEYWORD,
        "subject": {"type": "text"},
        "body_preview": {"type": "text"},
        "participants": _KEYWORD,
        "starts_at": {"type": "long"},
        "ends_at": {"type": "long"},
        "status": _KEYWORD,
        "sentiment": _KEYWORD,
        "topic": _KEYWORD,
        "next_step": {"type": "text"},
        "score": {"type": "double"},
        "shared_with": _KEYWORD,
        "engagement_state": _KEYWORD,
        "has_record": {"type": "boolean"},
    }
}

_LISTS = ("participants", "shared_with")


class ActivityProjection(Projection):
    """Hub row + current engagement -> the activity document, id ``hub_id``."""

    name: ClassVar[str] = "activities"
    alias: ClassVar[str] = INDEX_ALIAS
    mappings: ClassVar[Mapping[str, Any]] = INDEX_MAPPINGS
    tables: ClassVar[tuple[TableSchema, ...]] = (ACTIVITY_HUB, ENGAGEMENT_LOG)

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        hub = [r for r in rows[ACTIVITY_HUB.name] if r.cells]
        if not hub:
            return None
        doc: dict[str, Any] = {"hub_id": str(key["hub_id"])}
        for name, cell in sorted(hub[0].cells.items()):
            if cell.value is None:
                continue
            doc[name] = split_addresses(cell.value) if name in _LISTS else cell.value  # type: ignore[arg-type]
        doc["has_record"] = "kind" in doc
        engagement = current_engagement(rows[ENGAGEMENT_LOG.name])
        if engagement is not None:
            doc["engagement_state"] = engagement.state
        return doc
