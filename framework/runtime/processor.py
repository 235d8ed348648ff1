"""One attempt at one message: parse, map with the agent, write to every sink."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from framework.core.errors import Transient
from framework.core.events import Event, EventError, parse_event
from framework.core.projection import Projection
from framework.decoders.base import DecodeError, Record, normalize_headers
from framework.runtime.agent import KeyedAgent
from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.errors import MessageError, SinkFailure, is_io_failure
from framework.runtime.mapping import Screen, map_event
from framework.runtime.sinks import BatchSink, Sink, Written
from framework.runtime.work import Work
from stores.errors import TransientStoreError

__all__ = ["Processor", "Mapped", "AgentProcessor", "parse_work", "record_of", "key_mismatch", "bounded"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Called with a sink's name and the seconds one call to it took (``framework.metrics`` sets it).
sink_timer: Callable[[str, float], None] | None = None

#: What ``map_batch`` gives: an opaque item per good work (in order), and each bad work with its error.
Mapped = tuple[list[Any], list[tuple[Work, MessageError]]]


class Processor(Protocol):
    """What the runtime runs: ``prepare`` each message ahead, then either one call per attempt
    (the per-key path) or, when ``batchable``, ``map_batch`` and ``write_batch`` for many. A
    processor may also have ``on_rebalance()``, called whenever the worker's partitions move."""

    name: str
    batchable: bool

    def prepare(self, work: Work) -> None:
        """Parse ahead of scheduling so the work joins its relation key's lane."""

    async def __call__(self, work: Work) -> None:
        """One attempt; raises MessageError (park) or a transient error (retry)."""

    def map_batch(self, works: Sequence[Work]) -> Mapped | Awaitable[Mapped]:
        """The pure step for many messages (or an awaitable of it, for a processor that reads
        its state first): what to write for the good ones (an opaque item per work, in order),
        and each bad one with its error."""

    async def write_batch(self, items: Sequence[Any]) -> None:
        """Write every item, each sink once; raises when any of it may not be durable."""


def _ordering_key(key: bytes | None) -> str | bytes | None:
    """A Kafka key as the ordering key it carries (UTF-8 text); raw bytes when it is not text."""
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return key


def key_mismatch(key: bytes | None, event: Event) -> EventError | None:
    """Why a Kafka record's key is not the UTF-8 text of its event's ``ordering_key`` (the key
    that chose its partition, so the one that orders it), or None when it is."""
    if key == event.ordering_key.encode("utf-8"):
        return None
    if key is None:
        why = "the Kafka record has no key"
    elif not key:
        why = "the Kafka key is empty"
    else:
        try:
            why = f"the Kafka key {key.decode('utf-8')[:200]!r} differs"
        except UnicodeDecodeError:
            why = f"the Kafka key is not UTF-8 text ({key[:64]!r})"
    return EventError("ordering_key", f"{why}; the event's ordering_key is {event.ordering_key[:200]!r}")


def record_of(work: Work) -> Record:
    """``work`` as the record a decoder reads (``framework.decoders.Record``)."""
    tp: Any = work.tp
    topic, partition = (tp[0], tp[1]) if isinstance(tp, tuple) and len(tp) == 2 else (str(tp), 0)
    headers = normalize_headers(work.headers)  # Faust's are a list of (str, bytes) pairs
    return Record(work.key, work.value, topic, partition, work.offset, work.timestamp, headers)


def _decode(work: Work) -> Event:
    """The event ``work.decoder`` makes of the record (MessageError at stage ``parse``)."""
    decoder = work.decoder
    try:
        event = decoder.decode(record_of(work))
    except Transient as exc:  # e.g. the schema registry is down: retried, like a sink's failure
        raise SinkFailure(f"decoder:{decoder.name}", exc) from exc
    except Exception as exc:  # noqa: BLE001 - whatever else decoding raises is the message's
        raise MessageError("parse", exc) from exc
    if not isinstance(event, Event):
        raise MessageError(
            "parse", DecodeError("decoder", f"{decoder!r} gave {type(event).__name__}, not an Event")
        )
    if decoder.checks_key and (mismatch := key_mismatch(work.key, event)) is not None:
        raise MessageError("key", mismatch)
    return event


def parse_work(work: Work) -> Event:
    """The event of ``work``; MessageError at stage ``parse`` when it is not one, at stage
    ``key`` when its Kafka key is not its ``ordering_key`` (``key_mismatch``). A work with a
    ``decoder`` (the agent's, ``framework.decoders``) is decoded by it, else read as the envelope."""
    if work.decoder is not None:
        return _decode(work)
    if work.value is None:
        raise MessageError("parse", EventError("event", "empty message"))
    try:
        event = parse_event(work.value)
    except Exception as exc:  # noqa: BLE001 - whatever decoding raises is the message's
        raise MessageError("parse", exc) from exc
    mismatch = key_mismatch(work.key, event)
    if mismatch is not None:
        raise MessageError("key", mismatch)
    return event


async def bounded(sink: str, timeout: float, call: Awaitable[T]) -> T:
    """Await one sink call within ``timeout``; classify its failure.

    A timeout or an I/O failure (``errors.is_io_failure``) raises SinkFailure
    (retry, counted against ``sink`` for back-off); any other error is the
    message's (MessageError, stage ``sink``).
    """
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):  # no extra task, unlike wait_for
            return await call
    except TimeoutError as exc:
        raise SinkFailure(sink, TransientStoreError(f"no answer within {timeout}s")) from exc
    except Exception as exc:  # noqa: BLE001 - classified: I/O is retried, the rest is the message's
        if is_io_failure(exc):
            raise SinkFailure(sink, exc) from exc
        raise MessageError("sink", exc) from exc
    finally:
        if sink_timer is not None:
            sink_timer(sink, time.perf_counter() - start)


class AgentProcessor:
    """Turns a Work into durable writes through ``map_event`` and every sink in order.

    Its ``map_batch`` reads nothing that earlier batches write, so the runtime may map a batch
    while the previous one is being written (``map_ahead``, ``framework.runtime.batch``): worth
    it when the writes run beside this process's Python (a store's writer process, a remote
    store), not when they take turns with it."""

    def __init__(
        self,
        agent: KeyedAgent,
        sinks: Sequence[Sink],
        sink_timeout: float = 10.0,
        projections: Sequence[Projection] = (),
        dedupe: DuplicateFilter | None = None,
        screen: Callable[[], Screen | None] | None = None,
        resolve: Screen | None = None,
        map_ahead: bool = False,
    ) -> None:
        self.agent = agent
        self.map_ahead = map_ahead
        self.name = agent.name
        self.sinks = tuple(sinks)
        self.sink_timeout = sink_timeout
        self.projections = tuple(projections)
        self.dedupe = dedupe
        #: the current erasure screen (``framework.erasure.ScreenHolder``), or None
        self.screen = screen or (lambda: None)
        #: the ID mutation resolution of an agent writing owner tables (``framework.idmutation``)
        self.resolve = resolve
        self.batchable = all(isinstance(s, BatchSink) for s in self.sinks)

    def prepare(self, work: Work) -> None:
        """Parse ahead and find the relation key. A message that does not parse, or whose Kafka
        key is not its ordering key, is parked when its turn comes; until then it holds the lane
        of its Kafka key read as the ordering key, so later events of that key wait behind it."""
        work.decoder = self.agent.decoder
        try:
            work.event = parse_work(work)
        except (MessageError, SinkFailure):  # a decoder's transient failure: retried in its turn
            work.event = None
            work.relation = _ordering_key(work.key)
            return
        try:
            work.relation = self.agent.relation_key(work.event)
        except Exception:  # noqa: BLE001 - a failing relation_key falls back to the ordering key
            work.relation = work.event.ordering_key

    def _applied_before(self, work: Work, event: Event) -> bool:
        """True when the duplicate filter knows this very event (id and bytes) as applied."""
        return self.dedupe is not None and self.dedupe.skips(work, event)

    def _remember(self, applied: Sequence[tuple[Work, Event]]) -> None:
        if self.dedupe is not None and applied:
            self.dedupe.remember(applied)

    async def __call__(self, work: Work) -> None:
        event = work.event if work.event is not None else parse_work(work)
        if self._applied_before(work, event):
            return
        mutations = map_event(self.agent, event, self.projections, self.screen(), self.resolve)
        for sink in self.sinks:
            await bounded(sink.name, self.sink_timeout, sink.write(event, mutations))
        self._remember([(work, event)])

    def map_batch(self, works: Sequence[Work]) -> Mapped:
        """Items ``(work, written)``; ``written`` is None for an exact duplicate (skipped)."""
        items: list[tuple[Work, Written | None]] = []
        bad: list[tuple[Work, MessageError]] = []
        screen = self.screen()
        for work in works:
            try:
                event = work.event if work.event is not None else parse_work(work)
                if self._applied_before(work, event):
                    items.append((work, None))
                    continue
                mapped = map_event(self.agent, event, self.projections, screen, self.resolve)
                items.append((work, (event, mapped)))
            except MessageError as exc:
                bad.append((work, exc))
            except SinkFailure as exc:  # a decoder's: write_batch raises it, the per-key path retries
                items.append((work, exc))  # type: ignore[arg-type]
        return items, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        failed = next((w for _, w in items if isinstance(w, SinkFailure)), None)
        if failed is not None:
            raise failed  # nothing written: the whole batch goes to the per-key path
        batch = [written for _, written in items if written is not None]
        if not batch:
            return
        for sink in self.sinks:
            assert isinstance(sink, BatchSink)
            await bounded(sink.name, self.sink_timeout, sink.write_batch(batch))
        self._remember([(w, written[0]) for w, written in items if written is not None])
