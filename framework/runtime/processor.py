"""One attempt at one message: parse, map with the agent, write to every sink."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, TypeVar

from framework.core.events import Event, EventError, parse_event
from framework.core.projection import Projection
from framework.runtime.agent import KeyedAgent
from framework.runtime.errors import MessageError, SinkFailure, is_transient
from framework.runtime.mapping import map_event
from framework.runtime.sinks import BatchSink, Sink, Written
from framework.runtime.work import Work
from stores.errors import TransientStoreError

__all__ = ["Processor", "AgentProcessor", "parse_work", "bounded"]

T = TypeVar("T")


class Processor(Protocol):
    """What the runtime runs: ``prepare`` each message ahead, then either one call per attempt
    (the per-key path) or, when ``batchable``, ``map_batch`` and ``write_batch`` for many."""

    name: str
    batchable: bool

    def prepare(self, work: Work) -> None:
        """Parse ahead of scheduling so the work joins its relation key's lane."""

    async def __call__(self, work: Work) -> None:
        """One attempt; raises MessageError (park) or a transient error (retry)."""

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        """The pure step for many messages: what to write for the good ones (an opaque item
        per work, in order), and each bad one with its error."""

    async def write_batch(self, items: Sequence[Any]) -> None:
        """Write every item, each sink once; raises when any of it may not be durable."""


def parse_work(work: Work) -> Event:
    """The event of ``work``; MessageError at stage ``parse`` when it is not one."""
    if work.value is None:
        raise MessageError("parse", EventError("event", "empty message"))
    try:
        return parse_event(work.value)
    except EventError as exc:
        raise MessageError("parse", exc) from exc


async def bounded(sink: str, timeout: float, call: Awaitable[T]) -> T:
    """Await one sink call within ``timeout``; classify its failure.

    A timeout or a transient error raises SinkFailure (retry, counted against
    ``sink`` for back-off); any other error is the message's (MessageError,
    stage ``sink``).
    """
    try:
        async with asyncio.timeout(timeout):  # no extra task, unlike wait_for
            return await call
    except TimeoutError as exc:
        raise SinkFailure(sink, TransientStoreError(f"no answer within {timeout}s")) from exc
    except Exception as exc:  # noqa: BLE001 - classified: transient unless message-level
        if is_transient(exc):
            raise SinkFailure(sink, exc) from exc
        raise MessageError("sink", exc) from exc


class AgentProcessor:
    """Turns a Work into durable writes through ``map_event`` and every sink in order."""

    def __init__(
        self,
        agent: KeyedAgent,
        sinks: Sequence[Sink],
        sink_timeout: float = 10.0,
        projections: Sequence[Projection] = (),
    ) -> None:
        self.agent = agent
        self.name = agent.name
        self.sinks = tuple(sinks)
        self.sink_timeout = sink_timeout
        self.projections = tuple(projections)
        self.batchable = all(isinstance(s, BatchSink) for s in self.sinks)

    def prepare(self, work: Work) -> None:
        """Parse ahead; a message that does not parse keeps its Kafka key as relation and is
        parked when its turn comes."""
        try:
            work.event = parse_work(work)
            work.relation = self.agent.relation_key(work.event)
        except Exception:  # noqa: BLE001 - reported by __call__ when the work runs
            work.event = None

    async def __call__(self, work: Work) -> None:
        event = work.event if work.event is not None else parse_work(work)
        mutations = map_event(self.agent, event, self.projections)
        for sink in self.sinks:
            await bounded(sink.name, self.sink_timeout, sink.write(event, mutations))

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        items: list[tuple[Work, Written]] = []
        bad: list[tuple[Work, MessageError]] = []
        for work in works:
            try:
                event = work.event if work.event is not None else parse_work(work)
                items.append((work, (event, map_event(self.agent, event, self.projections))))
            except MessageError as exc:
                bad.append((work, exc))
        return items, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        batch = [written for _, written in items]
        for sink in self.sinks:
            assert isinstance(sink, BatchSink)
            await bounded(sink.name, self.sink_timeout, sink.write_batch(batch))
