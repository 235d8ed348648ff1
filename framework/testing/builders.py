"""Event builders for tests: ``make_event`` with sane defaults and ``Timeline``, an in-order history."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from framework.core.events import Event

__all__ = ["make_event", "auto_event_id", "Timeline"]


def auto_event_id(type: str, key: str, version: int, payload: Mapping[str, Any]) -> str:
    """A deterministic event id: the same type, key, version and payload give the same id."""
    body = json.dumps([type, key, version, payload], sort_keys=True, default=repr, separators=(",", ":"))
    return f"{type}@{version}:{hashlib.sha256(body.encode()).hexdigest()[:16]}"


def make_event(
    type: str,
    payload: Mapping[str, Any] | None = None,
    *,
    key: str = "k",
    version: int = 1,
    event_id: str | None = None,
    occurred_at: int | None = None,
) -> Event:
    """An ``Event`` of ``type``: ordering key ``key``, ``occurred_at`` defaults to ``version``,
    ``event_id`` to ``auto_event_id`` (stable, so rebuilding the event gives the same one)."""
    body = dict(payload or {})
    return Event(
        event_id=event_id if event_id is not None else auto_event_id(type, key, version, body),
        ordering_key=key,
        version=version,
        occurred_at=version if occurred_at is None else occurred_at,
        type=type,
        payload=body,
    )


class Timeline(list[Event]):
    """An in-order history under construction: ``add`` appends an event one ``step`` after the last.

    >>> t = Timeline(start=1_000)
    >>> t.add("item.set", {"x": 1}).version, t.add("item.set", {"x": 2}).version
    (1000, 2000)
    """

    def __init__(self, start: int = 1_000, step: int = 1_000) -> None:
        super().__init__()
        if start < 0 or step < 0:
            raise ValueError("Timeline: start and step must not be negative")
        self.next_version, self.step = start, step

    def add(
        self,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        key: str = "k",
        version: int | None = None,
        event_id: str | None = None,
        occurred_at: int | None = None,
    ) -> Event:
        """Append and return an event at ``version`` (default: the next version of the timeline)."""
        v = self.next_version if version is None else version
        e = make_event(type, payload, key=key, version=v, event_id=event_id, occurred_at=occurred_at)
        self.append(e)
        self.next_version = max(self.next_version, v + self.step)
        return e
