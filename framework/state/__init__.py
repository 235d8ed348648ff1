"""Declared lookups and joins that converge (docs/how-to/lookups-and-joins.md).

- ``Lookup``: a keyed table an agent reads, fed by the events of a topic.
- ``Entry``: one entry (``value``, ``version``); ``StateView``: the read-only
  view ``handle(event, state)`` receives; ``Missing``: the entry has not
  arrived (the event waits for it).
- ``JoinConfig``: bounds (pending events, readers per entry, overdue report).
"""

from __future__ import annotations

from framework.core.lookup import Entry, Lookup
from framework.state.join import JoinConfig, PendingFull
from framework.state.view import Missing, StateView

__all__ = ["Lookup", "Entry", "StateView", "Missing", "JoinConfig", "PendingFull"]
