"""``JoinProcessor``: the runtime's processor for an agent with lookups.

Per attempt: parse, make sure the partition's join state is restored,
``JoinBook.plan`` (map with the current entries, or wait for a missing one),
write the mutations to every sink, ``commit``, then send the changed state
keys to the changelog and wait until the broker has them; only then does
the attempt succeed (and the event get acknowledged). ``remap`` maps again
the events that read (or wait for) entries that changed; it retries
transient failures until they pass and parks an event whose mapping now
fails. It runs the per-key path only (``batchable`` is False).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from framework.core.events import Event, parse_event
from framework.runtime.errors import MessageError
from framework.runtime.processor import bounded, parse_work
from framework.runtime.sinks import Sink
from framework.runtime.work import Work
from framework.state.join import JoinBook, Plan

__all__ = ["JoinProcessor", "Changelog", "partition_of"]

log = logging.getLogger(__name__)

#: Called with the partition, the event, its raw JSON and the error of an event to park.
Park = Callable[[int, Event, str, MessageError], Awaitable[None]]


class Changelog(Protocol):
    """Where the join state's changes go, per partition, and where they are restored from."""

    async def send(self, partition: int, records: Sequence[tuple[str, str | None]]) -> int:
        """Send records; returns the offset after the last one, once the broker has them all."""

    async def end(self, partition: int) -> int:
        """The partition's end offset."""

    async def read(self, partition: int) -> list[tuple[str, str | None]]:
        """Every record of the partition, oldest first."""


def partition_of(tp: Any) -> int:
    """The partition number of a topic partition (a Faust TP or a ``(topic, n)`` tuple)."""
    part = getattr(tp, "partition", None)
    return int(part if part is not None else tp[1])


_MARK = "M\x1f"


class JoinProcessor:
    """Runs an agent with lookups (see the module docstring)."""

    batchable = False

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
        #: partitions this worker owns (None: all, as in the test driver)
        self.owned: set[int] | None = None if changelog is None else set()
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
        await self.ready(p)
        raw = (work.value or b"").decode("utf-8", "surrogatepass")
        try:
            await self._write(self.book.plan(p, event, raw))
        except MessageError:  # parked by the runtime: no longer a reader nor pending
            await self._send(p, self.book.forget(p, event.event_id))
            raise

    async def _write(self, plan: Plan) -> None:
        if plan.mutations:
            for sink in self.sinks:
                await bounded(sink.name, self.sink_timeout, sink.write(plan.event, plan.mutations))
        self.book.commit(plan)
        await self._send(plan.partition, plan.keys)

    async def _send(self, p: int, keys: Iterable[str]) -> None:
        keys = list(dict.fromkeys(keys))
        if self.changelog is None or not keys:
            return
        records = [(k, self.book.kv.get(k)) for k in keys]
        after = await self.changelog.send(p, records)
        self.book.kv.put(f"{_MARK}{p}", str(after))

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
            fut = self._ready.pop(p, None)
            if fut is not None and not fut.done():
                fut.cancel()

    def owns(self, p: int) -> bool:
        return self.owned is None or p in self.owned

    async def ready(self, p: int) -> None:
        """Restore partition ``p``'s join state from the changelog unless the local copy is the
        changelog's latest (this worker wrote its last record); then map again what is unsettled."""
        if self.changelog is None:
            return
        fut = self._ready.get(p)
        if fut is None:
            fut = self._ready[p] = asyncio.ensure_future(self._restore(p))
        await asyncio.shield(fut)

    async def _restore(self, p: int) -> None:
        changelog = self.changelog
        assert changelog is not None
        end = await changelog.end(p)
        mark = self.book.kv.get(f"{_MARK}{p}")
        if mark is None or int(mark) != end:
            self.book.drop_partition(p)
            n = 0
            for key, value in await changelog.read(p):
                if value is None:
                    self.book.kv.delete(key)
                else:
                    self.book.kv.put(key, value)
                n += 1
            self.book.kv.put(f"{_MARK}{p}", str(end))
            self.book.restored()
            self.restored_records += n
            log.info("%s: restored %d join-state records of partition %d from the changelog", self.name, n, p)
        self._spawn(self._reconcile(p))

    async def _reconcile(self, p: int) -> None:
        for part, eid in self.book.unsettled([p]):
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
                await self._send(p, self.book.forget(p, eid))
                log.error("%s: %s no longer maps (%s): parked", self.name, eid, exc)
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
        """The join book's status plus re-mapping counters."""
        out = self.book.status()
        out.update(remapped=self.remapped, remap_retries=self.remap_retries, restored=self.restored_records)
        return out

    join_status = status
