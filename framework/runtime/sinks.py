"""Sinks: where an event's mutations go. Each write is awaited until durable."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from framework.events import Event
from framework.mutations import Mutation
from stores.base import WideColumnStore

__all__ = ["Sink", "WideColumnSink", "ChangeFeedSink", "change_events"]


class Sink(Protocol):
    """Applies one event's mutations; returns only when they are durable."""

    name: str

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None: ...


class WideColumnSink:
    """Applies mutations to a wide-column store."""

    name = "wide_column"

    def __init__(self, store: WideColumnStore) -> None:
        self.store = store

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        if mutations:
            await self.store.apply(mutations)


def change_events(event: Event, mutations: Iterable[Mutation], tables: Iterable[str]) -> list[Event]:
    """One ``row_changed`` event per (table, key) of ``tables`` that ``mutations`` touch.

    The change keeps the source event's ordering key, so a consumer keyed by
    it sees one entity's changes in order.
    """
    wanted = set(tables)
    out: dict[tuple[str, str], Event] = {}
    for m in mutations:
        if m.table not in wanted:
            continue
        key = dict(m.key)
        ident = (m.table, json.dumps(key, sort_keys=True, default=str))
        if ident in out and out[ident].version >= m.version:
            continue
        out[ident] = Event(
            event_id=f"{event.event_id}/{m.table}",
            ordering_key=event.ordering_key,
            version=m.version,
            occurred_at=event.occurred_at,
            type="row_changed",
            payload={"table": m.table, "key": key},
        )
    return list(out.values())


class ChangeFeedSink:
    """Announces rows of projected tables changed by an event, after the store write."""

    name = "change_feed"

    def __init__(self, send: Callable[[bytes, bytes], Awaitable[None]], tables: Iterable[str]) -> None:
        self._send = send
        self.tables = tuple(tables)

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        for change in change_events(event, mutations, self.tables):
            await self._send(change.ordering_key.encode(), change.to_json())
