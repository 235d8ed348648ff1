"""One attempt at one message: parse, map with the agent, write to every sink."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from framework.events import Event, EventError, parse_event
from framework.runtime.agent import KeyedAgent
from framework.runtime.errors import MessageError, SinkFailure, is_transient
from framework.runtime.scheduler import Work
from framework.runtime.sinks import Sink
from stores.errors import TransientStoreError

__all__ = ["AgentProcessor"]


class AgentProcessor:
    """Turns a Work into durable writes; raises MessageError for bad messages.

    Each sink call is bounded by ``sink_timeout``; a timeout is transient.
    """

    def __init__(self, agent: KeyedAgent, sinks: Sequence[Sink], sink_timeout: float = 10.0) -> None:
        self.agent = agent
        self.sinks = tuple(sinks)
        self.sink_timeout = sink_timeout

    def parse(self, work: Work) -> Event:
        if work.value is None:
            raise MessageError("parse", EventError("event", "empty message"))
        try:
            return parse_event(work.value)
        except EventError as exc:
            raise MessageError("parse", exc) from exc

    def prepare(self, work: Work) -> None:
        """Parse ahead of scheduling so the work joins its relation key's lane.

        A message that does not parse keeps its Kafka key as relation and is
        parked when its turn comes.
        """
        try:
            work.event = self.parse(work)
            work.relation = self.agent.relation_key(work.event)
        except Exception:  # noqa: BLE001 - reported by __call__ when the work runs
            work.event = None

    async def __call__(self, work: Work) -> None:
        event = work.event if work.event is not None else self.parse(work)
        try:
            mutations = list(self.agent.handle(event))
        except Exception as exc:  # noqa: BLE001 - any mapping failure is the message's
            raise MessageError("map", exc) from exc
        for sink in self.sinks:
            try:
                async with asyncio.timeout(self.sink_timeout):  # no extra task, unlike wait_for
                    await sink.write(event, mutations)
            except TimeoutError as exc:
                timeout = TransientStoreError(f"no answer within {self.sink_timeout}s")
                raise SinkFailure(sink.name, timeout) from exc
            except Exception as exc:  # noqa: BLE001 - classified: transient unless message-level
                if is_transient(exc):
                    raise SinkFailure(sink.name, exc) from exc
                raise MessageError("sink", exc) from exc
