"""One document compared: what the store's rows give against what the index holds.

The categories are the Spark check's (``spark_batch.convergence``): ``missing`` (a document
the rows give is not in the index), ``orphaned`` (the index holds a document the rows do not
give), ``stale`` (the index holds an older version), ``ahead`` (a newer version than the
partition's mark: no projection wrote it, and the index refuses to replace it with a lower
one), ``content`` (same version, other content). The index holds a document as JSON, so the
expected one is compared as the index would store it (``encode_document``), by the rule
``converge spark check`` compares by: equal canonical JSON (``json_codec.same_json``), so ``2``
and ``2.0`` (or ``1`` and ``true``) differ, as they do in the index.
"""

from __future__ import annotations

from typing import Any, Literal

from framework.core.json_codec import same_json
from framework.core.projection import Document
from framework.runtime.written_records import as_stored
from stores.base import SearchHit

__all__ = ["Category", "CATEGORIES", "classify", "as_stored", "same_content"]

Category = Literal["missing", "orphaned", "stale", "ahead", "content"]
#: Every category, in the order reports list them.
CATEGORIES: tuple[Category, ...] = ("missing", "orphaned", "stale", "ahead", "content")


def same_content(doc: Any, found: SearchHit) -> bool:
    """Whether the index's copy ``found`` holds ``doc`` (as the index stores it), by the Spark
    check's rule (``json_codec.same_json``)."""
    return same_json(as_stored(doc), dict(found.source))


def classify(expected: Document, found: SearchHit | None, *, versions: bool = True) -> Category | None:
    """How ``found`` (the index's document, None when absent) differs from ``expected`` (the
    projection of the store's rows: ``(doc_id, document or None, version)``); None when equal.
    ``versions`` False compares content only."""
    _, doc, version = expected
    if doc is None:
        return None if found is None else "orphaned"
    if found is None:
        return "missing"
    held = (found.version or 0) if versions else version
    if held < version:
        return "stale"
    if held > version:
        return "ahead"
    return None if same_content(doc, found) else "content"
