"""The batch path: a whole micro-batch mapped, merged and written with one call per sink.

Per-cell last write wins is associative, commutative and idempotent, so the
mutations of many events can be written together with exactly the effect of
writing them one by one, in any order. The runtime therefore runs every
message whose relation key has nothing waiting in the per-key path
(``KeyedScheduler``) as one batch:

1. each message is tracked for ordered acknowledgement;
2. the pure step maps them all; a bad message is parked (durable) and counts
   as finished, its key moves on;
3. every sink is written once for the batch, in the declared order;
4. on success every message is finished; the contiguous prefix is acked.

When any sink write of the batch fails (transient or not), nothing of it
counts as done: its messages go to the per-key path in offset order, which
retries, backs off, pauses on an outage and narrows a message-level failure
down to the one event it parks. The same happens while a sink is down.

``map_batch`` may be a coroutine (a processor that must first load state, as
``framework.state.JoinProcessor`` restores join state); it must not raise.

``Batches`` runs the micro-batches of one runtime in arrival order. A processor
whose ``map_batch`` is plain and reads nothing the previous batch writes says so
with ``map_ahead = True``: then batch N+1 is tracked and mapped while batch N is
still being written, and its messages whose relation keys N does not hold are
written at once (the store queues the write behind N's). Its messages of keys
that N holds wait for N to end and then go on as if N+1 had started only then:
behind N's fallbacks in the per-key path when N failed, else written. So one
key's events are still written in offset order, and at most two batches are in
flight.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from framework.runtime.processor import Processor
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.work import Work

__all__ = ["Batches", "run_batch"]

log = logging.getLogger(__name__)

Park = Callable[[Work, BaseException], Awaitable[None]]
#: A message's relation key within its partition: what orders it.
LaneKey = tuple[Hashable, Hashable]


async def run_batch(
    works: Sequence[Work], scheduler: KeyedScheduler, processor: Processor, park: Park
) -> None:
    """Run ``works`` (one micro-batch, in arrival order) by the batch path where it may, else
    by the per-key path."""
    if not processor.batchable or scheduler.outage:
        for work in works:
            scheduler.submit(work)
        return
    fast, generations = _select(works, scheduler)
    if not fast:
        return
    mapped = processor.map_batch(fast)
    items, bad = await mapped if inspect.isawaitable(mapped) else mapped
    await _write(items, bad, generations, scheduler, processor, park)


class Batches:
    """The micro-batches of one runtime, run in arrival order: one in flight, or two for a
    processor with ``map_ahead`` (see the module's doc)."""

    def __init__(self, scheduler: KeyedScheduler, processor: Processor, park: Park) -> None:
        self.scheduler, self.processor, self.park = scheduler, processor, park
        self.ahead = bool(getattr(processor, "map_ahead", False)) and processor.batchable
        #: the batches in flight, oldest first, each with the lane keys it writes
        self._flight: deque[tuple[asyncio.Future[None], frozenset[LaneKey]]] = deque()

    async def run(self, works: Sequence[Work]) -> None:
        """Start the batch ``works``; returns once it is started (a bug in an earlier batch
        re-raises here)."""
        sched, processor = self.scheduler, self.processor
        if not self.ahead or sched.outage:
            await self.join()
            task = asyncio.ensure_future(run_batch(works, sched, processor, self.park))
            self._flight.append((task, frozenset()))
            return
        while len(self._flight) > 1:
            await self._flight.popleft()[0]
        previous = self._flight[-1] if self._flight else None
        held = previous[1] if previous is not None else frozenset()
        fast, generations = _select(works, sched, held)
        mapped = processor.map_batch(fast) if fast else ([], [])
        assert not inspect.isawaitable(mapped), "map_ahead needs a plain map_batch"
        items, bad = mapped
        keys = frozenset((w.tp, w.relation) for w in fast)
        after = None if previous is None else previous[0]
        task = asyncio.ensure_future(self._write_ahead(fast, items, bad, generations, held, after))
        self._flight.append((task, keys))

    async def join(self) -> None:
        """Wait for every batch in flight, oldest first (a bug in one re-raises)."""
        while self._flight:
            await self._flight[0][0]
            self._flight.popleft()

    async def settle(self, timeout: float) -> None:
        """On the way out: let the batches in flight finish within ``timeout``, else cancel them
        (their messages were not acknowledged and are redelivered)."""
        flight = [f for f, _ in self._flight]
        self._flight.clear()
        if not flight:
            return
        done, pending = await asyncio.wait(flight, timeout=timeout)
        for fut in pending:
            fut.cancel()
        for fut in done:
            if not fut.cancelled() and fut.exception() is not None:
                log.error("a batch failed on the way out: %r", fut.exception())

    async def _write_ahead(
        self,
        fast: list[Work],
        items: list[Any],
        bad: Sequence[tuple[Work, BaseException]],
        generations: dict[int, int],
        held: frozenset[LaneKey],
        previous: asyncio.Future[None] | None,
    ) -> None:
        """Write the mapped batch: at once what ``previous`` does not hold, the rest once it
        ended, behind its fallbacks when their keys went to the per-key path."""
        sched, processor, park = self.scheduler, self.processor, self.park
        if previous is None or not held:
            await _write(items, bad, generations, sched, processor, park)
            return
        free = [i for i in items if (i[0].tp, i[0].relation) not in held]
        free_bad = [b for b in bad if (b[0].tp, b[0].relation) not in held]
        writing = None
        if len(free) + len(free_bad) < len(items) + len(bad):
            if free or free_bad:
                writing = asyncio.ensure_future(_write(free, free_bad, generations, sched, processor, park))
            await asyncio.wait((previous,))  # its failure (a bug) is the runtime's to re-raise
            behind: set[int] = set()
            for work in fast:  # offset order: a key's messages join its lane in turn
                if (work.tp, work.relation) in held and sched.busy(work):
                    behind.add(id(work))
                    if sched.current(work, generations[id(work)]):
                        sched.enqueue(work)
            rest = [i for i in items if (i[0].tp, i[0].relation) in held and id(i[0]) not in behind]
            rest_bad = [b for b in bad if (b[0].tp, b[0].relation) in held and id(b[0]) not in behind]
            if rest or rest_bad:
                await _write(rest, rest_bad, generations, sched, processor, park)
            if writing is not None:
                await writing
        else:
            await _write(items, bad, generations, sched, processor, park)


def _select(
    works: Sequence[Work], scheduler: KeyedScheduler, held: frozenset[LaneKey] = frozenset()
) -> tuple[list[Work], dict[int, int]]:
    """The works for the batch path, tracked, with their generations by ``id``; the others
    (their key busy in the per-key path, and not ``held`` by the batch in flight) are submitted
    to it."""
    fast: list[Work] = []
    generations: dict[int, int] = {}
    for work in works:
        if scheduler.busy(work) and (work.tp, work.relation) not in held:
            scheduler.submit(work)  # behind earlier messages of its key
        elif (generation := scheduler.track(work)) is not None:
            fast.append(work)
            generations[id(work)] = generation
    return fast, generations


async def _write(
    items: Sequence[Any],
    bad: Sequence[tuple[Work, BaseException]],
    generations: dict[int, int],
    scheduler: KeyedScheduler,
    processor: Processor,
    park: Park,
) -> None:
    """Park the ``bad`` works, write the ``items`` with one call per sink, then finish them,
    or send them to the per-key path when the write failed."""
    for work, exc in bad:
        try:
            await park(work, exc)
        except Exception as park_exc:  # noqa: BLE001 - the per-key path retries parking
            log.warning("could not park %s@%s (%r): retrying it alone", work.tp, work.offset, park_exc)
            scheduler.enqueue(work)
            continue
        scheduler.finish(work, generations[id(work)], parked=True)
    if not items:
        return
    try:
        await processor.write_batch(items)
    except Exception as exc:  # noqa: BLE001 - every failure of a batch goes to the per-key path
        scheduler.counters.batch_fallbacks += 1
        log.warning("batch of %d failed (%r): running its messages one key at a time", len(items), exc)
        for work, _ in items:
            if scheduler.current(work, generations[id(work)]):
                scheduler.enqueue(work)
        return
    scheduler.counters.batch_writes += 1
    scheduler.batch_written()
    scheduler.finish_written([work for work, _ in items], generations)
