"""Events of the support desk for unit tests, and a small store-backed projection driver."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples.support_desk.app import app
from examples.support_desk.identity import TicketRef
from framework import Event
from stores.open import open_wide_store

REF = TicketRef("acme", "zendesk", "4711")
IDENTITY: dict[str, Any] = {"tenant": "acme", "source": "zendesk", "external_id": "4711"}
CREATED: dict[str, Any] = {
    **IDENTITY,
    "subject": "Cannot log in",
    "requester_email": "Ana.Silva@Example.com",
    "requester_name": "Ana Silva",
    "priority": "high",
}
_ids = itertools.count()


def event(
    type_: str, version: int = 100, occurred_at: int | None = None, key: str | None = None, **payload: Any
) -> Event:
    """An event about ``REF`` (or the ticket ``key`` names) with a fresh id."""
    return Event(
        f"e{next(_ids)}",
        key or REF.ordering_key,
        version,
        version if occurred_at is None else occurred_at,
        type_,
        payload,
    )


async def document(events: Sequence[Event], tmp_path: Path) -> tuple[str, dict[str, Any] | None, int]:
    """The ticket document of ``REF`` after ``events`` went through their agents into a SQLite store,
    with the projection's version marks, in the given order."""
    projection = app.projection("tickets")
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = await open_wide_store(f"sqlite:///{tmp_path / 'unit.db'}")
    try:
        for schema in app.tables:
            await store.ensure_table(schema)
        for e in events:
            mutations = list(app.route(e).handle(e))
            await store.apply([*mutations, *projection.version_marks(mutations)])
        rows = {t.name: await store.read_partition(t.name, REF.key) for t in projection.tables}
        mark = await store.read_row(projection.version_table.name, REF.key)
        doc_id, doc, version = projection.document(REF.key, rows, mark)
        return doc_id, None if doc is None else dict(doc), version
    finally:
        await store.close()
