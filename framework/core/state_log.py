"""Reading state logs: the current state of an entity is derived, never stored.

A state log row (see ``framework.core.schema.state_log_schema``) has the clustering
key ``(at, event_id)`` and the cells ``state`` plus attributes. The current
state is the row with the latest ``at``; rows at the same ``at`` are ordered
by the declared precedence of their states (later in the list wins; states
not in the list rank below all listed ones), then by ``event_id``. The result
depends only on the set of rows, never on the order they arrived in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from framework.core.mutations import CellValue
from framework.core.rows import Row

__all__ = ["StateEntry", "current_state"]


@dataclass(frozen=True)
class StateEntry:
    """One state of an entity as logged: state, when, by which event, attributes."""

    state: str
    at: int
    event_id: str
    version: int
    attrs: Mapping[str, CellValue] = field(default_factory=dict)


def _entry(row: Row) -> StateEntry | None:
    state = row.cells.get("state")
    if state is None or not isinstance(state.value, str):
        return None
    at, event_id = row.key.get("at"), row.key.get("event_id")
    if not isinstance(at, int) or isinstance(at, bool) or not isinstance(event_id, str):
        raise ValueError(f"not a state log row (needs int 'at' and text 'event_id' keys): {dict(row.key)}")
    attrs = {name: cell.value for name, cell in row.cells.items() if name != "state"}
    return StateEntry(state.value, at, event_id, state.writetime, attrs)


def current_state(rows: Iterable[Row], precedence: Sequence[str]) -> StateEntry | None:
    """The current state among state log ``rows``; None when no row has a live state."""
    if isinstance(precedence, str):
        raise TypeError("precedence must be a sequence of state names, not a string")
    rank = {state: i for i, state in enumerate(precedence)}
    best: StateEntry | None = None
    best_key: tuple[int, int, str] | None = None
    for row in rows:
        entry = _entry(row)
        if entry is None:
            continue
        key = (entry.at, rank.get(entry.state, -1), entry.event_id)
        if best_key is None or key > best_key:
            best, best_key = entry, key
    return best
