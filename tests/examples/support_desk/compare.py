"""Compare a run's rows and documents with the oracle (for the in-memory and the end-to-end tests),
and read them back from the store and index of an end-to-end run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from examples.support_desk.history import History
from examples.support_desk.oracle import (
    CellState,
    Divergence,
    compare_documents,
    compare_rows,
    expected_state,
    row_cells,
)
from examples.support_desk.schemas import STATUSES
from framework import Row, current_state
from stores.open import open_search_index, open_wide_store


def divergences(
    history: History,
    tickets: Iterable[Row],
    status_log: Iterable[Row],
    comments: Iterable[Row],
    documents: Mapping[str, tuple[Mapping[str, Any], int | None]],
) -> list[Divergence]:
    """Every difference between the oracle of ``history`` and the rows and documents of a run."""
    expected = expected_state(history.truth)
    logs: dict[tuple[Any, ...], dict[str, CellState]] = {}
    by_ticket: dict[str, list[Row]] = {}
    for r in status_log:
        logs[(str(r.key["ticket_id"]), r.key["at"], r.key["event_id"])] = row_cells(r)
        by_ticket.setdefault(str(r.key["ticket_id"]), []).append(r)
    status = {t: s.state for t, rows in by_ticket.items() if (s := current_state(rows, STATUSES))}
    rows: dict[str, dict[str, CellState]] = {str(r.key["ticket_id"]): row_cells(r) for r in tickets}
    notes: dict[tuple[Any, ...], dict[str, CellState]] = {
        (str(r.key["ticket_id"]), r.key["at"], r.key["comment_id"]): row_cells(r) for r in comments
    }
    return (
        compare_rows("ticket", expected.tickets, rows)
        + compare_rows("ticket_status_log", expected.status_log, logs)
        + compare_rows("ticket_comment", expected.comments, notes)
        + [
            Divergence("status", t, None, expected.status.get(t), status.get(t))
            for t in sorted(set(expected.status) | set(status))
            if expected.status.get(t) != status.get(t)
        ]
        + compare_documents(expected.documents, documents)
    )


async def read_run(
    store_url: str, es_url: str, tenants: set[str], ticket_ids: set[str]
) -> tuple[list[list[Row]], dict[str, Any]]:
    """The rows of the three tables that belong to ``ticket_ids``, and the documents of ``tenants``
    in the index. The topics are shared by the tests on one stack, so a worker also stores other
    tests' tickets: they are left out."""
    store = await open_wide_store(store_url)
    index = open_search_index(es_url, "document")
    try:
        rows = [
            [r async for r in store.scan(t) if str(r.key["ticket_id"]) in ticket_ids]
            for t in ("ticket", "ticket_status_log", "ticket_comment")
        ]
        await index.refresh("tickets")
        docs = {
            h.doc_id: (dict(h.source), h.version)
            async for h in index.scan("tickets")
            if h.source.get("tenant") in tenants
        }
    finally:
        await store.close()
        await index.close()
    return rows, docs
