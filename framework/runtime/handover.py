"""The Faust consumer's hand-over of each fetched message: straight into a runtime's intake for
the runtimes' topics, and without a set of tasks per message for the rest.

Faust's fetch loop hands every message to the conductor with ``wait_first(callback(message),
suspend_flow.wait())``, so that a delivery that blocks (a full stream buffer, a full producer
buffer, suspended flow control) is abandoned once the consumer suspends its flow for a
rebalance, stops or crashes. Mode's ``wait_first`` makes a task of each awaitable and of the
stop and crash events, waits with ``asyncio.wait`` and cancels the losers: four tasks and
three cancellations a message. The conductor then decodes the message into a Faust event, puts
it in the stream's buffer, and the stream runs its sensors before the agent sees it.

``HandoverConsumer`` runs Faust's fetch loop (``_drain_messages``) with one change: a message of
a topic with a route is offered straight to it, without the two coroutines and the wait per
message. It also recognises the fetch loop's call (the conductor's ``on_message`` coroutine, not
yet started, and the consumer's own ``suspend_flow.wait()``) for a loop it does not run itself:

- a message of a topic with a route (``route``: an ``Intake`` per runtime topic) goes
  straight into the intake, no task, event or stream in between; while the intake is full the
  loop waits for room, or until the flow is suspended, the consumer stops or crashes, when
  the message is left undelivered (never acknowledged, it is fetched again from the committed
  offset). A routed message recognised here never reaches the conductor; one delivered by a
  call not recognised reaches the runtime's stream, which the runtime also moves into its intake;
- any other message is delivered by one task given one turn of the loop; one still waiting
  then is waited for with one future, woken by the task's end or by any of those three events,
  and cancelled when an event came first, as Faust's is.

While the flow is suspended a routed message is left as it is (fetched again later), any other
goes to mode's ``wait_first``, as does every other call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from types import CoroutineType
from typing import Any, Protocol

import faust
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.services import WaitArgT, WaitResults
from mode.utils.times import Seconds

__all__ = [
    "HandoverConsumer",
    "HandoverTransport",
    "Route",
    "RoutedMessage",
    "route",
    "routed",
    "routes_of",
    "is_kafka_url",
]

#: ``suspend_flow`` is an ``asyncio.Event``; the stop and crash events are mode's ``Event``.
_FLOW_WAIT = asyncio.Event.wait.__code__
_ROUTES = "_converge_routes"


class Route(Protocol):
    """Where the messages of one topic go instead of the conductor (``intake.Intake``)."""

    def offer(self, message: Any) -> bool: ...

    def room(self) -> asyncio.Future[None]: ...


def routes_of(app: Any) -> dict[str, Route | None]:
    """The app's routes, topic name -> route, or None for a topic several runtimes consume
    (created empty on first use)."""
    routes: dict[str, Route | None] | None = getattr(app, _ROUTES, None)
    if routes is None:
        routes = {}
        setattr(app, _ROUTES, routes)
    return routes


def route(app: faust.types.AppT, topic: str, to: Route) -> None:
    """Hand the messages of ``topic`` to ``to`` when the app's consumer is a ``HandoverConsumer``.
    A topic that a second runtime routes too goes through the conductor to each runtime's
    stream instead: Faust then acknowledges a message once every stream has acknowledged it."""
    routes = routes_of(app)
    if topic in routes and routes[topic] is not to:
        routes[topic] = None
    else:
        routes[topic] = to


def routed(app: faust.types.AppT, topic: str, to: Route) -> bool:
    """True when the app's consumer hands the messages of ``topic`` to ``to``."""
    consumer = app.consumer
    return isinstance(consumer, HandoverConsumer) and consumer.hands_over and routes_of(app).get(topic) is to


class RoutedMessage:
    """A fetched record of a routed topic: what the intake, the runtime and Faust's
    ``Consumer.ack`` read of a message (``timestamp`` in seconds, as Faust's), without the
    stream's tracking fields that a Faust ``ConsumerMessage`` carries."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "headers", "key", "value", "tp",
                 "generation_id", "acked", "__weakref__")  # fmt: skip

    def __init__(self, tp: Any, record: Any, generation_id: int | None) -> None:
        self.tp, self.topic, self.partition, self.offset = tp, record.topic, record.partition, record.offset
        ts = record.timestamp
        self.timestamp = None if ts is None else ts / 1000.0
        self.headers, self.key, self.value = record.headers, record.key, record.value
        self.generation_id, self.acked = generation_id, False


class HandoverConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer whose fetch loop hands messages over as described above."""

    async def wait_first(self, *coros: WaitArgT, timeout: Seconds | None = None) -> WaitResults:
        if timeout is not None:
            return await super().wait_first(*coros, timeout=timeout)
        delivery, flow_wait = (coros[0], coros[1]) if len(coros) == 2 else (None, None)
        if not self.hands_over or not inspect.iscoroutine(delivery) or not self._is_flow_wait(flow_wait):
            return await super().wait_first(*coros)
        message = _message_of(delivery)
        to = None if message is None else routes_of(self.app).get(message.topic)
        if to is not None:  # never to the conductor: no stream would take it
            delivery.close()
            flow_wait.close()  # type: ignore[union-attr]
            if await self._hand_over(to, message):
                return WaitResults([message], [None], False)
            return WaitResults([], [], True)
        if self.suspend_flow.is_set():
            return await super().wait_first(delivery, flow_wait)  # type: ignore[arg-type]
        flow_wait.close()  # type: ignore[union-attr]
        task: asyncio.Future[Any] = asyncio.ensure_future(delivery)
        try:
            await asyncio.sleep(0)  # the delivery's first step runs before this resumes
            if not task.done():
                await self._until_done_or_halted(task)
        finally:
            halted = not task.done()  # the flow was suspended, the consumer stopped or crashed
            if halted:
                task.cancel()
        if halted:
            return WaitResults([], [], True)
        return WaitResults([delivery], [task.result()], False)

    @functools.cached_property
    def hands_over(self) -> bool:
        """True when the events a delivery waits on keep their waiting futures where this class
        expects them (``_waiters``, a deque): else every delivery is mode's and nothing is routed."""
        return all(isinstance(getattr(e, "_waiters", None), deque) for e in self._halting_events())

    async def _hand_over(self, to: Route, message: Any) -> bool:
        """Offer ``message`` to ``to``, waiting for room; False (not delivered, fetched again
        from the committed offset) when the flow is or gets suspended, or the consumer halts."""
        if self.suspend_flow.is_set():
            return False
        while not to.offer(message):
            room = to.room()
            await self._until_done_or_halted(room)
            if not room.done():
                return False
        monitor = self.app.monitor  # as the stream's sensors do: Faust's stall check reads both
        monitor.tp_read_offsets[message.tp] = message.offset
        monitor.stream_inbound_time[message.tp] = time.monotonic()
        return True

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - the worker's fetch loop
        """Faust's fetch loop (``faust.transport.consumer.Consumer._drain_messages``, faust-streaming
        0.15): the same read offsets, gaps, commits and yields, but a routed message is handed
        over directly (``_hand_over``) and only the others go through ``wait_first``."""
        if not self.hands_over:
            return await super()._drain_messages(fetcher)
        callback, routes = self.callback, routes_of(self.app)
        consumer_should_stop, fetcher_should_stop = self._stopped.is_set, fetcher._stopped.is_set
        get_read_offset, set_read_offset = self._read_offset.__getitem__, self._read_offset.__setitem__
        fetching, set_flag, unset_flag = (
            faust_consumer.CONSUMER_FETCHING,
            self.diag.set_flag,
            self.diag.unset_flag,
        )
        commit_every, acks_enabled_for = self._commit_every, self.app.topics.acks_enabled_for
        suspended, monitor, monotonic = self.suspend_flow.is_set, self.app.monitor, time.monotonic
        read_offsets, inbound = monitor.tp_read_offsets, monitor.stream_inbound_time
        since_yield = 0
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                set_flag(fetching)
                records = self._fetch(timeout=1.0)
                await self.sleep(0)  # getmany may be called in a loop that never yields otherwise
                if not self.should_stop:
                    async for tp, message in records:
                        since_yield += 1
                        if since_yield > 100:
                            await asyncio.sleep(0)
                            since_yield = 0
                        offset, r_offset = message.offset, get_read_offset(tp)
                        if r_offset is not None and offset < r_offset:
                            continue  # read already (Faust drops it the same way)
                        gap = offset - (r_offset or 0)
                        if gap > 1 and r_offset and acks_enabled_for(message.topic):
                            await self._add_gap(tp, r_offset + 1, offset)
                        if commit_every is not None and self._n_acked >= commit_every:
                            self._n_acked = 0
                            await self.commit()
                        to = routes.get(tp.topic)
                        if to is not None:
                            if suspended() or not to.offer(message):
                                await self._hand_over(to, message)  # waits for room, or gives up
                            else:
                                read_offsets[tp] = offset  # as the stream's sensors do
                                inbound[tp] = monotonic()
                        else:
                            await self.wait_first(callback(message), self.suspend_flow.wait())
                        set_read_offset(tp, offset)
                    unset_flag(fetching)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            unset_flag(fetching)

    async def _fetch(
        self, timeout: float
    ) -> AsyncIterator[tuple[Any, Any]]:  # pragma: no cover - the worker's
        """Faust's ``getmany`` (faust-streaming 0.15): one fetch, round robin over its partitions
        (``_round_robin``), cut short when the flow stops or the generation changes; a routed
        topic's records come as ``RoutedMessage``s, the others as Faust's messages, and each
        partition's high-water mark is tracked once a fetch instead of once a record."""
        records, active = await self._wait_next_records(timeout)
        generation_id = self.app.consumer_generation_id
        if records is None or self.should_stop:
            return
        if not self.flow_active:  # as Faust: back to the committed offsets
            try:
                await self.perform_seek()
            except Exception as exc:  # noqa: BLE001 - Faust logs and goes on
                self.log.warning(f"exception performing seek when flow not active {exc}")
            return
        buffered, routes, monitor = self._buffered_partitions, routes_of(self.app), self.app.monitor
        to_message, app, tracked = self._to_message, self.app, set()
        for tp, record in _round_robin(records):
            if not self.flow_active or app.consumer_generation_id != generation_id:
                break
            if active is None or tp in active or tp in buffered:
                if tp not in tracked:
                    tracked.add(tp)
                    monitor.track_tp_end_offset(tp, self.highwater(tp))
                if routes.get(tp.topic) is not None:
                    yield tp, RoutedMessage(tp, record, generation_id)
                else:
                    yield tp, to_message(tp, record)

    async def _until_done_or_halted(self, future: asyncio.Future[Any]) -> None:
        """Return once ``future`` is done or the flow is suspended, or the consumer stopped or crashed."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        events = self._halting_events()
        future.add_done_callback(wake)
        for event in events:
            event._waiters.append(waiter)  # Event.set() resolves every waiting future
        try:
            if not future.done() and not any(event.is_set() for event in events):
                await waiter
        finally:
            future.remove_done_callback(wake)
            for event in events:
                event._waiters.remove(waiter)

    def _halting_events(self) -> tuple[Any, ...]:
        """The events that end a delivery's wait: the flow suspended, the consumer stopped or
        crashed. Each keeps its waiting futures in a deque, ``_waiters``, that ``set()`` resolves."""
        return (self.suspend_flow, self._stopped, self._crashed)

    def _is_flow_wait(self, coro: object) -> bool:
        """True for the fetch loop's ``suspend_flow.wait()`` (not yet started), the sign of a delivery."""
        return (
            inspect.iscoroutine(coro)
            and coro.cr_code is _FLOW_WAIT
            and coro.cr_frame is not None
            and coro.cr_frame.f_locals.get("self") is self.suspend_flow
        )


def _round_robin(records: Mapping[Any, list[Any]]) -> Iterator[tuple[Any, Any]]:
    """(partition, record) of a fetch, one record of each partition in turn, each partition's in
    order: no topic or partition waits behind another's whole fetch (as Faust's round robin over
    topics, then partitions; this one interleaves in C)."""
    if len(records) == 1:
        ((tp, only),) = records.items()
        for record in only:
            yield tp, record
        return
    tps = list(records)
    for row in itertools.zip_longest(*records.values()):
        for tp, record in zip(tps, row, strict=True):
            if record is not None:
                yield tp, record


def _message_of(delivery: CoroutineType[Any, Any, Any]) -> Any:
    """The message of the conductor's ``on_message(message)`` coroutine, not yet started; else None."""
    frame = delivery.cr_frame
    if delivery.cr_code.co_name != "on_message" or frame is None:
        return None
    if inspect.getcoroutinestate(delivery) != inspect.CORO_CREATED:
        return None
    message = frame.f_locals.get("message")
    return message if hasattr(message, "tp") and hasattr(message, "topic") else None


class HandoverTransport(faust_aiokafka.Transport):
    """Faust's aiokafka transport with ``HandoverConsumer``."""

    Consumer = HandoverConsumer


def is_kafka_url(url: Any) -> bool:
    """True when ``url`` (a broker URL of the app's config) uses Faust's aiokafka transport."""
    return str(getattr(url, "scheme", "") or str(url).partition("://")[0]) in ("kafka", "aiokafka")
