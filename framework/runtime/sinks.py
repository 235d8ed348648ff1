"""Sinks: where an event's mutations go. Each write is awaited until durable.

A sink may also write a whole micro-batch at once (``write_batch``: one
round trip for many events); the runtime uses the batch path only when every
sink of an agent can.

A destination may also be probed (``Probe``): a cheap health request that the
runtime sends while the destination is down, so that it retries the blocked
keys as soon as the destination answers again (``framework.runtime.scheduler``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from framework.core.events import Event
from framework.core.mutations import Mutation
from stores.base import WideColumnStore

__all__ = ["Sink", "BatchSink", "Written", "WideColumnSink", "Probe"]

#: One event and the mutations it maps to.
Written = tuple[Event, Sequence[Mutation]]

#: A destination's health check: True when it answers (the runtime bounds each call and takes
#: an exception for False). A processor names its probes by sink in ``probes``.
Probe = Callable[[], Awaitable[bool]]


class Sink(Protocol):
    """Applies one event's mutations; returns only when they are durable."""

    name: str

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None: ...


@runtime_checkable
class BatchSink(Protocol):
    """A sink that also writes many events' mutations in one go, with the same effect as
    writing them one by one in any order; returns only when all are durable."""

    name: str

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None: ...

    async def write_batch(self, batch: Sequence[Written]) -> None: ...


class WideColumnSink:
    """Applies mutations to a wide-column store; a batch is one ``apply`` (rows merged by the store)."""

    name = "wide_column"

    def __init__(self, store: WideColumnStore) -> None:
        self.store = store

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        if mutations:
            await self.store.apply(mutations)

    async def write_batch(self, batch: Sequence[Written]) -> None:
        mutations = [m for _, ms in batch for m in ms]
        if mutations:
            await self.store.apply(mutations)
