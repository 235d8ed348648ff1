"""``JoinProcessor``: the runtime's processor for an agent with lookups.

Per attempt (the per-key path): parse, make sure the partition's join state
is restored, ``JoinBook.plan`` (map with the current entries, or wait for a
missing one), write the mutations to every sink, ``commit``, then send the
changed state keys to the changelog and wait until the broker has them;
only then does the attempt succeed (and the event get acknowledged).

Per micro-batch (the batch path, when every sink writes batches):
``map_batch`` restores the batch's partitions, then plans every event in
order with the current entries (a bad event is dropped from the book and
handed back to be parked, alone); ``write_batch`` writes every sink once
and, at the same time, sends the changed keys once per partition, awaiting
all before it returns. The records sent already say done (``JoinBook.plan``
with ``presume``): no event of the batch is acknowledged unless both are
durable, and one that is not is planned again when it is run again or
redelivered. Any failure sends the whole batch to the per-key path, which
retries transient failures and narrows a bad event down.

``remap`` maps again the events that read (or wait for) entries that
changed; it retries transient failures until they pass and parks an event
whose mapping now fails. Changelog sends go through ``ChangelogOutbox``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from framework.core.events import Event, parse_event
from framework.runtime.errors import MessageError, SinkFailure
from framework.runtime.processor import bounded, parse_work
from framework.runtime.sinks import BatchSink, Sink
from framework.runtime.work import Work
from framework.state.join import JoinBook, Plan
from framework.state.outbox import Changelog, ChangelogOutbox

__all__ = ["JoinProcessor", "Changelog", "partition_of"]

log = logging.getLogger(__name__)

#: Called with the partition, the event, its raw JSON and the error of an event to park.
Park = Callable[[int, Event, str, MessageError], Awaitable[None]]


def partition_of(tp: Any) -> int:
    """The partition number of a topic partition (a Faust TP or a ``(topic, n)`` tuple)."""
    part = getattr(tp, "partition", None)
    return int(part if part is not None else tp[1])


def _raw(work: Work) -> str:
    return (work.value or b"").decode("utf-8", "surrogatepass")


class JoinProcessor:
    """Runs an agent with lookups (see the module docstring)."""

    def __init__(
        self,
        agent: Any,
        sinks: Sequence[Sink],
        book: JoinBook,
        sink_timeout: float = 10.0,
        *,
        park: Park | None = None,
        changelog: Changelog | None = None,
        retry_delay: float = 0.5,
    ) -> None:
        self.agent = agent
        self.name = agent.name
        self.sinks = tuple(sinks)
        self.book = book
        self.sink_timeout = sink_timeout
        self.park = park
        self.changelog = changelog
        self.retry_delay = retry_delay
        self.batchable = all(isinstance(s, BatchSink) for s in self.sinks)
        #: partitions this worker owns (None: all, as in the test driver)
        self.owned: set[int] | None = None if changelog is None else set()
        self.outbox = ChangelogOutbox(book.kv, changelog, self.owns)
        self.remapped = 0
        self.remap_retries = 0
        self.restored_records = 0
        self._ready: dict[int, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the per-event path ------------------------------------------------------
    def prepare(self, work: Work) -> None:
        try:
            work.event = parse_work(work)
        except MessageError:
            work.event = None
            return
        try:
            work.relation = self.agent.relation_key(work.event)
        except Exception:  # noqa: BLE001 - a failing relation_key falls back to the ordering key
            work.relation = work.event.ordering_key

    async def __call__(self, work: Work) -> None:
        event = work.event if work.event is not None else parse_work(work)
        p = partition_of(work.tp)
        try:
            await self.ready(p)
        except Exception as exc:  # noqa: BLE001 - the changelog could not be read: retry
            raise SinkFailure("changelog", exc) from exc
        try:
            await self._write(self.book.plan(p, event, _raw(work)))
        except MessageError:  # parked by the runtime: no longer a reader nor pending
            self._log(p, self.book.forget(p, event.event_id))
            await self._flush(p)
            raise

    def _log(self, p: int, keys: Iterable[str]) -> None:
        self.outbox.touch(p, self.book.logged(keys))

    async def _write(self, plan: Plan) -> None:
        self._log(plan.partition, plan.keys)
        if plan.mutations:
            for sink in self.sinks:
                await bounded(sink.name, self.sink_timeout, sink.write(plan.event, plan.mutations))
        self._commit(plan)
        await self._flush(plan.partition)

    def _commit(self, plan: Plan) -> None:
        if self.book.commit(plan):
            self.outbox.touch(plan.partition, plan.keys[:1])  # the event's record (done)

    async def _flush(self, p: int) -> None:
        """The changelog has every change of ``p`` made so far (a failure is a retry)."""
        try:
            await self.outbox.flush(p)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the broker did not take it: retry
            raise SinkFailure("changelog", exc) from exc

    # -- the batch path ----------------------------------------------------------
    async def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        """Plan every work in order; items ``(work, plan)``, or ``(work, error)`` for a work
        that could not be planned now (its partition's state unreadable, or a failure that is
        not the message's): ``write_batch`` then raises, sending the batch to the per-key path.
        Never raises."""
        items: list[tuple[Work, Plan | BaseException]] = []
        bad: list[tuple[Work, MessageError]] = []
        unready = await self._ready_all({partition_of(w.tp) for w in works})
        forgot: set[int] = set()
        for work in works:
            p = partition_of(work.tp)
            if p in unready:
                items.append((work, unready[p]))
                continue
            event = work.event
            try:
                if event is None:
                    event = parse_work(work)
                plan = self.book.plan(p, event, _raw(work), presume=True)
            except MessageError as exc:
                if event is not None:
                    self._log(p, self.book.forget(p, event.event_id))
                    forgot.add(p)
                bad.append((work, exc))
                continue
            except Exception as exc:  # noqa: BLE001 - not the message's: the per-key path retries
                items.append((work, exc))
                continue
            self._log(p, plan.keys)
            items.append((work, plan))
        for p in forgot:  # the parked events leave the changelog before they are parked
            await self._flush_or_later(p)
        return items, bad

    async def _flush_or_later(self, p: int) -> None:
        try:
            await self.outbox.flush(p)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - still touched: sent with p's next flush
            log.warning("%s: changelog of partition %d not updated (%r): sent later", self.name, p, exc)

    async def _ready_all(self, partitions: Iterable[int]) -> dict[int, BaseException]:
        """Restore ``partitions``; the ones that could not be (failure, revoked meanwhile)."""
        if self.changelog is None:
            return {}
        out: dict[int, BaseException] = {}
        futs = {p: self._ready_future(p) for p in partitions}
        if futs:
            await asyncio.wait(futs.values())
        for p, fut in futs.items():
            if fut.cancelled() or not self.owns(p):
                out[p] = SinkFailure("changelog", RuntimeError(f"partition {p} was revoked"))
            elif (exc := fut.exception()) is not None:
                out[p] = SinkFailure("changelog", exc)
        return out

    async def write_batch(self, items: Sequence[Any]) -> None:
        """Write every sink once while each partition's changes are sent once, then commit
        every plan; raises when anything of it may not be durable (the batch goes to the
        per-key path)."""
        for _, plan in items:
            if isinstance(plan, BaseException):
                raise plan
        plans: list[Plan] = [plan for _, plan in items]
        partitions = sorted({plan.partition for plan in plans})
        sends = asyncio.gather(*(self.outbox.flush(p) for p in partitions), return_exceptions=True)
        try:
            batch = [(plan.event, plan.mutations) for plan in plans if plan.mutations]
            if batch:
                for sink in self.sinks:
                    assert isinstance(sink, BatchSink)
                    await bounded(sink.name, self.sink_timeout, sink.write_batch(batch))
        finally:
            results = await sends
        for result in results:
            if isinstance(result, BaseException):
                raise SinkFailure("changelog", result) from result
        for plan in plans:
            self._commit(plan)  # moved rows: the record's next send no longer names the old ones

    # -- restore ---------------------------------------------------------------
    def assign(self, partitions: Iterable[int]) -> None:
        """Partitions assigned to this worker (their state is restored on first use)."""
        if self.owned is not None:
            self.owned.update(partitions)

    def revoke(self, partitions: Iterable[int]) -> None:
        """Partitions moved away: their state is restored from the changelog if they come back."""
        for p in partitions:
            if self.owned is not None:
                self.owned.discard(p)
            self.outbox.left(p)
            fut = self._ready.pop(p, None)
            if fut is not None and not fut.done():
                fut.cancel()

    def owns(self, p: int) -> bool:
        return self.owned is None or p in self.owned

    def _ready_future(self, p: int) -> asyncio.Future[None]:
        fut = self._ready.get(p)
        if fut is None or (fut.done() and not fut.cancelled() and fut.exception() is not None):
            fut = self._ready[p] = asyncio.ensure_future(self._restore(p))  # first use, or a retry
        return fut

    async def ready(self, p: int) -> None:
        """Restore partition ``p``'s join state from the changelog unless the local copy is the
        changelog's latest (this worker wrote its last record); then map again what is unsettled."""
        if self.changelog is None:
            return
        await asyncio.shield(self._ready_future(p))

    async def _restore(self, p: int) -> None:
        changelog = self.changelog
        assert changelog is not None
        end = await changelog.end(p)
        if self.outbox.mark(p) != end:
            records = await changelog.read(p)
            kept = self.book.restore(p, records)
            self.outbox.restored(p, end)
            self.restored_records += kept
            log.info("%s: restored %d join records of partition %d from %d changelog records",
                     self.name, kept, p, len(records))  # fmt: skip
        self._spawn(self._reconcile(p))

    async def _reconcile(self, p: int) -> None:
        for part, eid in self.book.unsettled([p]):
            if not self.owns(part):
                return
            await self.remap_one(part, eid)

    # -- entries that changed ------------------------------------------------------
    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def remap(self, changed: Iterable[tuple[str, str]]) -> None:
        """Map again every event of an owned partition that read or waits for a changed entry."""
        for lookup, key in changed:
            if lookup not in self.book.names:
                continue
            for p, eid in self.book.readers(lookup, key):
                if self.owns(p):
                    if self.changelog is not None:
                        await self.ready(p)
                    await self.remap_one(p, eid)

    async def remap_one(self, p: int, eid: str) -> None:
        """Map one recorded event again with the current entries, until it is durable."""
        delay = self.retry_delay
        while True:
            record = self.book.load(p, eid)
            if record is None or self.book.settled(record):
                return  # gone, up to date, or still waiting for an entry that has not arrived
            raw = record["raw"]
            try:
                event = parse_event(raw)
                plan = self.book.plan(p, event, raw)
                await self._write(plan)
                self.remapped += 1
                return
            except MessageError as exc:
                self._log(p, self.book.forget(p, eid))
                log.error("%s: %s no longer maps (%s): parked", self.name, eid, exc)
                await self._flush_or_later(p)
                if self.park is not None:
                    await self.park(p, parse_event(raw), raw, exc)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - I/O: retry until it passes
                self.remap_retries += 1
                log.warning("%s: re-mapping %s failed (%r); retrying in %.1fs", self.name, eid, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def settle(self) -> None:
        """Wait for the background re-mappings started so far (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def status(self) -> dict[str, Any]:
        """The join book's status (owned partitions) plus re-mapping counters."""
        out = self.book.status(self.owns)
        out.update(remapped=self.remapped, remap_retries=self.remap_retries, restored=self.restored_records)
        return out

    join_status = status
