"""The reference app through the test kit, and what the oracle compares in a kit snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.engagement import current_engagement
from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG
from examples.activity_platform.app import app
from examples.activity_platform.history import History
from examples.activity_platform.oracle import (
    CellState,
    Divergence,
    Expected,
    compare_documents,
    compare_engagement,
    compare_rows,
    expected_state,
    row_cells,
)
from framework.core.events import Event
from framework.testing import Snapshot, run_history

__all__ = ["app", "in_order", "divergences", "oracle_divergences"]


def in_order(history: History) -> list[Event]:
    """The clean in-order pass of a generated history: each event once, by version."""
    return sorted(history.distinct(), key=lambda e: (e.version, e.event_id))


def divergences(expected: Expected, snap: Snapshot, *, writetimes: bool = True) -> list[Divergence]:
    """Every difference between the oracle and a snapshot (rows, logs, engagement, documents)."""
    hubs = {str(key[0]): row_cells(r) for key, r in snap.tables[ACTIVITY_HUB.name].items()}
    by_hub: dict[str, list[Any]] = {}
    logs: dict[tuple[str, int, str], dict[str, CellState]] = {}
    for r in snap.tables[ENGAGEMENT_LOG.name].values():
        hub = str(r.key["hub_id"])
        by_hub.setdefault(hub, []).append(r)
        logs[(hub, int(r.key["at"]), str(r.key["event_id"]))] = row_cells(r)  # type: ignore[arg-type]
    engaged: dict[str, tuple[str, int]] = {}
    for hub, rows in by_hub.items():
        current = current_engagement(rows)
        assert current is not None
        engaged[hub] = (current.state, current.version)
    return [
        *compare_rows(ACTIVITY_HUB.name, expected.hub_rows, hubs, writetimes=writetimes),
        *compare_rows(ENGAGEMENT_LOG.name, expected.engagement_logs, logs, writetimes=writetimes),
        *compare_engagement(expected.engagement, engaged),
        *compare_documents(expected.documents, snap.documents["activities"], versions=writetimes),
    ]


def oracle_divergences(history: History, delivered: Sequence[Event] | None = None) -> list[Divergence]:
    """Run ``delivered`` (default: the history's own arrival order) through the reference app in
    a fresh driver and compare with the oracle of the history's ground truth."""
    snap = run_history(app, list(history.events if delivered is None else delivered))
    return divergences(expected_state(history.truth), snap)
