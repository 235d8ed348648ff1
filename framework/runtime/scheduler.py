"""Keyed scheduling: in order per key, concurrent across keys, acked in offset order.

The scheduler knows nothing of Faust: it receives ``Work`` items in the order
a partition delivered them and calls back to process, park, acknowledge,
pause and resume. The Faust binding (``framework.runtime.binding``) feeds it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from framework.runtime.counters import Counters
from framework.runtime.errors import is_transient
from framework.runtime.offsets import OffsetTracker
from framework.runtime.retry import RetryPolicy

__all__ = ["Work", "KeyedScheduler", "SchedulerConfig"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Work:
    """One received message: where it came from, its key and raw value, and how to ack it."""

    tp: Hashable
    offset: int
    key: bytes | None
    value: bytes | None
    ack: Callable[[], Any] = field(repr=False, default=lambda: None)
    attempts: int = 0


@dataclass(frozen=True)
class SchedulerConfig:
    """Bounds of one scheduler.

    ``max_concurrency``: attempts running at once across keys.
    ``max_pending_per_partition``: received-but-unreleased messages of one
    partition before it is paused; it resumes at half that.
    ``attempt_timeout``: bound on one whole attempt (parse, map, every sink).
    """

    max_concurrency: int = 64
    max_pending_per_partition: int = 2000
    attempt_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(slots=True)
class _Lane:
    queue: deque[Work] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    blocked: bool = False


class KeyedScheduler:
    """Runs ``process`` for each Work: one at a time per key, keys in parallel.

    - ``process(work)`` raises a transient error to be retried (the key stays
      blocked, its later messages wait behind it) or a message-level error to
      be handed to ``park(work, exc)`` (durable before it returns), after which
      the key moves on.
    - ``ack`` of a Work is called only when it and every earlier offset of its
      partition are finished, in offset order.
    - ``pause(tp)``/``resume(tp)`` are called when a partition's pending work
      passes ``max_pending_per_partition`` and falls back under half of it.
    - A failure inside the scheduler itself (a bug) goes to ``crash(exc)``.
    """

    def __init__(
        self,
        process: Callable[[Work], Awaitable[None]],
        park: Callable[[Work, BaseException], Awaitable[None]],
        *,
        config: SchedulerConfig | None = None,
        pause: Callable[[Hashable], None] = lambda tp: None,
        resume: Callable[[Hashable], None] = lambda tp: None,
        crash: Callable[[BaseException], Any] = lambda exc: None,
        counters: Counters | None = None,
    ) -> None:
        self.config = config or SchedulerConfig()
        self._process = process
        self._park = park
        self._pause = pause
        self._resume = resume
        self._crash = crash
        self.counters = counters or Counters()
        self._sem = asyncio.Semaphore(self.config.max_concurrency)
        self._lanes: dict[tuple[Hashable, bytes | None], _Lane] = {}
        self._trackers: dict[Hashable, OffsetTracker[Work]] = {}
        self._paused: set[Hashable] = set()
        self._revoked_epoch: dict[Hashable, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    # -- intake ------------------------------------------------------------
    def submit(self, work: Work) -> None:
        """Accept a message; messages of one partition must arrive in offset order."""
        tracker = self._trackers.get(work.tp)
        if tracker is None:
            tracker = self._trackers[work.tp] = OffsetTracker()
        tracker.track(work.offset, work)
        self.counters.received += 1
        self._idle.clear()
        lane_key = (work.tp, work.key)
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane()
        lane.queue.append(work)
        if lane.task is None:
            lane.task = asyncio.ensure_future(self._run_lane(lane_key, lane))
        if tracker.pending > self.config.max_pending_per_partition and work.tp not in self._paused:
            self._paused.add(work.tp)
            self.counters.pauses += 1
            self._pause(work.tp)

    # -- lanes ---------------------------------------------------------------
    async def _run_lane(self, lane_key: tuple[Hashable, bytes | None], lane: _Lane) -> None:
        tp = lane_key[0]
        epoch = self._revoked_epoch.get(tp, 0)
        try:
            while lane.queue:
                work = lane.queue[0]
                finished = await self._run_until_finished(work, lane, tp, epoch)
                if not finished:  # partition revoked: drop the lane, do not ack
                    return
                lane.queue.popleft()
                self._finish(work)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a bug in the runtime: crash, never drop silently
            log.exception("scheduler lane crashed")
            self.counters.crashes += 1
            self._crash(exc)
        finally:
            if self._lanes.get(lane_key) is lane:
                del self._lanes[lane_key]
            if not self._lanes:
                self._idle.set()

    async def _run_until_finished(self, work: Work, lane: _Lane, tp: Hashable, epoch: int) -> bool:
        while True:
            if self._revoked_epoch.get(tp, 0) != epoch:
                return False
            work.attempts += 1
            try:
                async with self._sem:
                    self.counters.in_flight += 1
                    try:
                        await asyncio.wait_for(self._process(work), self.config.attempt_timeout)
                    finally:
                        self.counters.in_flight -= 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                if is_transient(exc):
                    self.counters.retried += 1
                    if not lane.blocked:
                        lane.blocked = True
                        self.counters.blocked_keys += 1
                    delay = self.config.retry.delay(work.attempts)
                    log.warning(
                        "transient failure (attempt %d, retry in %.2fs) tp=%s offset=%s: %r",
                        work.attempts, delay, tp, work.offset, exc,
                    )  # fmt: skip
                    await asyncio.sleep(delay)
                    continue
                try:
                    await self._park(work, exc)
                except Exception as park_exc:  # noqa: BLE001 - parking must succeed before moving on
                    self.counters.retried += 1
                    log.error("could not park tp=%s offset=%s: %r; retrying", tp, work.offset, park_exc)
                    await asyncio.sleep(self.config.retry.delay(work.attempts))
                    continue
                self.counters.parked += 1
            else:
                self.counters.processed += 1
            if lane.blocked:
                lane.blocked = False
                self.counters.blocked_keys -= 1
            return True

    def _finish(self, work: Work) -> None:
        tracker = self._trackers.get(work.tp)
        if tracker is None:
            return
        for released in tracker.finish(work.offset):
            released.ack()
            self.counters.acked += 1
        if work.tp in self._paused and tracker.pending <= self.config.max_pending_per_partition // 2:
            self._paused.discard(work.tp)
            self.counters.resumes += 1
            self._resume(work.tp)

    # -- lifecycle -----------------------------------------------------------
    def revoke(self, tps: set[Hashable] | frozenset[Hashable]) -> int:
        """Forget the work of revoked partitions; it is redelivered to their new owner."""
        dropped = 0
        for tp in tps:
            self._revoked_epoch[tp] = self._revoked_epoch.get(tp, 0) + 1
            tracker = self._trackers.pop(tp, None)
            if tracker is not None:
                dropped += tracker.pending
            self._paused.discard(tp)
            for lane_key in [k for k in self._lanes if k[0] == tp]:
                lane = self._lanes.pop(lane_key)
                if lane.blocked:
                    self.counters.blocked_keys -= 1
                if lane.task is not None:
                    lane.task.cancel()
        if not self._lanes:
            self._idle.set()
        return dropped

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for all accepted work to finish; True when it did."""
        deadline = time.monotonic() + timeout
        while self._lanes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._idle.wait(), remaining)
            except TimeoutError:
                return False
        return True

    async def close(self) -> None:
        """Cancel every lane (unfinished work is not acked and will be redelivered)."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
        self._idle.set()

    # -- introspection -------------------------------------------------------
    def pending(self, tp: Hashable) -> int:
        tracker = self._trackers.get(tp)
        return 0 if tracker is None else tracker.pending

    @property
    def paused(self) -> frozenset[Hashable]:
        return frozenset(self._paused)
