"""Sinks: where an event's mutations go. Each write is awaited until durable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from framework.core.events import Event
from framework.core.mutations import Mutation
from stores.base import WideColumnStore

__all__ = ["Sink", "WideColumnSink"]


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
