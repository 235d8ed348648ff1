"""What the activity platform's decoded runs are compared with: the oracle of the history's ground
truth (``examples.activity_platform.oracle``), the model of what the sources hold, adjusted for
what a format changes by design (a CloudEvent's event id is ``<id>@<source>``, so its engagement
log rows are keyed by that), and a store's rows in the oracle's shape."""

from __future__ import annotations

from typing import Any

from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from examples.activity_platform.history import History
from examples.activity_platform.oracle import (
    CellState,
    Divergence,
    Expected,
    compare_rows,
    expected_state,
    row_cells,
)
from stores.open import open_wide_store
from tests.decoders.activity_formats import CE_SOURCE

LogKey = tuple[str, int, str]


def expected_of(history: History, fmt: str) -> Expected:
    """The oracle of ``history`` as ``fmt`` writes it."""
    expected = expected_state(history.truth)
    if fmt != "cloudevents":
        return expected
    logs = {
        (hub, at, f"{eid}@{CE_SOURCE}"): cells for (hub, at, eid), cells in expected.engagement_logs.items()
    }
    return Expected(expected.hub_rows, logs, expected.engagement, expected.documents)


def values(rows: dict[Any, dict[str, CellState]]) -> dict[Any, dict[str, Any]]:
    """Rows without write times."""
    return {k: {c: v for c, (v, _) in cells.items()} for k, cells in rows.items()}


async def store_rows(url: str) -> tuple[dict[str, dict[str, CellState]], dict[LogKey, dict[str, CellState]]]:
    """The hub rows and engagement log rows of the store at ``url``, as the oracle has them."""
    store = await open_wide_store(url)
    try:
        hubs = {str(r.key["hub_id"]): row_cells(r) async for r in store.scan(ACTIVITY_HUB.name)}
        logs = {
            (str(r.key["hub_id"]), int(str(r.key["at"])), str(r.key["event_id"])): row_cells(r)
            async for r in store.scan(ENGAGEMENT_LOG.name)
        }
    finally:
        await store.close()
    return {k: v for k, v in hubs.items() if v}, {k: v for k, v in logs.items() if v}


def store_divergences(
    expected: list[Expected],
    hubs: dict[str, dict[str, CellState]],
    logs: dict[LogKey, dict[str, CellState]],
) -> list[Divergence]:
    """Rows of the store that differ from the union of ``expected`` (by value: a CDC image rewrites
    a row's unchanged cells at its own version, by design)."""
    want_hubs: dict[str, dict[str, CellState]] = {}
    want_logs: dict[LogKey, dict[str, CellState]] = {}
    for e in expected:
        want_hubs.update(e.hub_rows)
        want_logs.update(e.engagement_logs)
    return [
        *compare_rows(ACTIVITY_HUB.name, want_hubs, hubs, writetimes=False),
        *compare_rows(ENGAGEMENT_LOG.name, want_logs, logs, writetimes=False),
    ]
