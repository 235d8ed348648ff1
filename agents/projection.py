"""The search projection of a hub row: the whole document the indexer writes.

The document is built from the *merged* hub row (never from one event), plus
the current engagement state derived from the row's engagement log. Its
external version is the highest write time that contributed to it: the row's
highest live cell write time and, when engagement is included, the log's
highest write time. Every later read of the same row therefore yields a
version at least as high, so ``version_type=external_gte`` accepts it.

Only live cells appear (absent fields are omitted, never null). A row with
live cells but no main record (insights that arrived first, or survived a
cancellation) is indexed with ``has_record: false``; timelines filter on it.
A hub row with no live cell has no document: the indexer deletes it.
"""

from __future__ import annotations

from typing import Any

from agents.engagement import Engagement
from agents.schemas import split_addresses
from stores.base import Row

__all__ = ["INDEX_ALIAS", "INDEX_MAPPINGS", "project"]

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


def project(row: Row, engagement: Engagement | None = None) -> tuple[str, dict[str, Any], int]:
    """``(doc_id, document, version)`` of a live hub row and its current engagement.

    ``engagement`` is ``agents.engagement.current_engagement`` of the row's
    log (None when the log is empty). Raises ValueError for a row without
    live cells, which has no document.
    """
    if not row.cells:
        raise ValueError("project: a row without live cells has no document (delete it)")
    hub = str(row.key["hub_id"])
    doc: dict[str, Any] = {"hub_id": hub}
    for name, cell in sorted(row.cells.items()):
        if cell.value is None:
            continue
        doc[name] = split_addresses(cell.value) if name in _LISTS else cell.value  # type: ignore[arg-type]
    doc["has_record"] = "kind" in doc
    version = row.version
    if engagement is not None:
        doc["engagement_state"] = engagement.state
        version = max(version, engagement.version)
    return hub, doc, version
