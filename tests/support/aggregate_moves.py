"""How many entities an in-order pass moved between groups: a check that a property's histories
exercise moves at all."""

from __future__ import annotations

from collections.abc import Sequence

from framework import App, Event
from framework.testing.driver import Driver

__all__ = ["moved_entities"]


def moved_entities(app: App, events: Sequence[Event]) -> int:
    """Entities whose groups differ between the middle and the end of ``events`` sent in order,
    over every aggregate of ``app``."""
    half = len(events) // 2
    names = [a.name for a in app.aggregates]
    with Driver(app) as d:
        assert d.send(events[:half]) == []
        before = {name: d.contributions(name) for name in names}
        assert d.send(events[half:]) == []
        after = {name: d.contributions(name) for name in names}
    return sum(
        1
        for name in names
        for entity, groups in before[name].items()
        if set(groups) != set(after[name].get(entity, {}))
    )
