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

from framework.runtime.backoff import AdaptiveBackoff, BackoffConfig
from framework.runtime.counters import Counters
from framework.runtime.errors import SinkFailure, is_transient
from framework.runtime.failures import BlockedKey, FailureBook
from framework.runtime.offsets import OffsetTracker
from framework.runtime.work import Work

__all__ = ["KeyedScheduler", "SchedulerConfig"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchedulerConfig:
    """Bounds of one scheduler.

    ``max_concurrency``: attempts running at once across keys.
    ``max_pending_per_partition``: received-but-unreleased messages of one
    partition before it is paused; it resumes at half that.
    ``attempt_timeout``: bound on one whole attempt (parse, map, every sink).
    ``backoff``: retry delays, outage detection and when to park (see backoff.py).
    """

    max_concurrency: int = 64
    max_pending_per_partition: int = 2000
    attempt_timeout: float = 30.0
    backoff: BackoffConfig = field(default_factory=BackoffConfig)


@dataclass(slots=True)
class _Lane:
    queue: deque[Work] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    blocked: bool = False


class KeyedScheduler:
    """Runs ``process`` for each Work: one at a time per relation key, keys in parallel.

    - ``process(work)`` raises a transient error to be retried (the key stays
      blocked, its later messages wait behind it: the skipped queue) or a
      message-level error to be handed to ``park(work, exc)`` (durable before it
      returns), after which the key moves on. Adaptive back-off decides the
      delay, whether a destination is down (then every partition is paused and
      nothing is parked) or the message is bad (parked after a few attempts).
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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or SchedulerConfig()
        self._process = process
        self._park = park
        self._pause = pause
        self._resume = resume
        self._crash = crash
        self.counters = counters or Counters()
        self.backoff = AdaptiveBackoff(self.config.backoff, clock=clock)
        self.failures = FailureBook()
        self._clock = clock
        self._outage = False
        self._sem = asyncio.Semaphore(self.config.max_concurrency)
        self._lanes: dict[tuple[Hashable, Hashable], _Lane] = {}
        self._trackers: dict[Hashable, OffsetTracker[Work]] = {}
        self._paused: set[Hashable] = set()
        self._revoked_epoch: dict[Hashable, int] = {}
        self._unowned: set[Hashable] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    # -- intake ------------------------------------------------------------
    def submit(self, work: Work) -> None:
        """Accept a message for the per-key path; messages of one partition must arrive in
        offset order (one that does not is dropped, see ``track``)."""
        if self.track(work) is not None:
            self.enqueue(work)

    def owns(self, tp: Hashable) -> bool:
        """False from the revocation of ``tp`` until it is assigned again: work of it taken
        before the revocation must be dropped, not tracked."""
        return tp not in self._unowned

    def epoch(self, tp: Hashable) -> int:
        """The partition's epoch: it moves at every revocation and assignment, so work stamped
        with an older one was taken under an earlier ownership of ``tp``."""
        return self._revoked_epoch.get(tp, 0)

    def track(self, work: Work) -> int | None:
        """Register a received message for ordered acknowledgement (without running it);
        returns its partition's generation, to hand back to ``enqueue`` or ``finish``.

        None when the message is not taken: its partition is revoked (``owns``), it was taken
        under an earlier ownership of the partition (``work.epoch``: a batch taken before a
        rebalance that gave the partition back to this worker; its records are redelivered
        from the committed offset, and tracking it would drop that redelivery as a repeat),
        or its offset is not above every offset tracked so far (a record delivered again: the
        earlier delivery is pending or done, so dropping this one loses nothing). It is
        neither run nor acknowledged.
        """
        tracker = self._trackers.get(work.tp)
        last = None if tracker is None else tracker.last
        stale = work.epoch is not None and work.epoch != self.epoch(work.tp)
        if stale or not self.owns(work.tp) or (last is not None and work.offset <= last):
            self.counters.stale_dropped += 1
            return None
        if tracker is None:
            tracker = self._trackers[work.tp] = OffsetTracker()
        tracker.track(work.offset, work)
        self.counters.received += 1
        self._sync_pause(work.tp)
        return self._revoked_epoch.get(work.tp, 0)

    def busy(self, work: Work) -> bool:
        """True when earlier messages of ``work``'s relation key are still in the per-key path
        (running, retrying or waiting): then ``work`` must wait behind them."""
        return (work.tp, work.relation) in self._lanes

    def current(self, work: Work, generation: int) -> bool:
        """False when ``work``'s partition was revoked since it was tracked at ``generation``."""
        return self._revoked_epoch.get(work.tp, 0) == generation

    def finish(self, work: Work, generation: int, *, parked: bool = False) -> None:
        """A tracked message finished outside the per-key path (written, or ``parked``, in a
        batch); nothing happens when its partition was revoked since."""
        if not self.current(work, generation):
            return
        if parked:
            self.counters.parked += 1
            self.failures.parked(work.tp, work.relation)
        else:
            self.counters.processed += 1
            self.failures.succeeded(work.tp, work.relation)
        self._finish(work)

    def batch_written(self) -> None:
        """A micro-batch went through every sink: evidence that the sinks work (for keys
        with no failure), and the end of any outage."""
        self.backoff.record_success()
        self._sync_outage()

    @property
    def outage(self) -> bool:
        """True while some sink counts as down (every partition is paused)."""
        return self._outage

    def enqueue(self, work: Work) -> None:
        """Run a tracked message in the per-key path, behind earlier ones of its relation key."""
        self._idle.clear()
        lane_key = (work.tp, work.relation)
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane()
        lane.queue.append(work)
        if lane.blocked:
            self.failures.set_skipped(work.tp, work.relation, len(lane.queue) - 1)
        if lane.task is None:
            lane.task = asyncio.ensure_future(self._run_lane(lane_key, lane))

    def _sync_pause(self, tp: Hashable) -> None:
        tracker = self._trackers.get(tp)
        pending = 0 if tracker is None else tracker.pending
        bound = self.config.max_pending_per_partition
        if tp in self._paused:
            if not self._outage and pending <= bound // 2:
                self._paused.discard(tp)
                self.counters.resumes += 1
                self._resume(tp)
        elif self._outage or pending > bound:
            self._paused.add(tp)
            self.counters.pauses += 1
            self._pause(tp)

    def _sync_outage(self) -> None:
        down = self.backoff.any_down
        if down != self._outage:
            self._outage = down
            log.warning("destination %s: %s consumption", "down" if down else "back",
                        "pausing" if down else "resuming")  # fmt: skip
            for tp in list(self._trackers):
                self._sync_pause(tp)

    # -- lanes ---------------------------------------------------------------
    async def _run_lane(self, lane_key: tuple[Hashable, Hashable], lane: _Lane) -> None:
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
        first_failed: float | None = None
        while True:
            if self._revoked_epoch.get(tp, 0) != epoch:
                return False
            work.attempts += 1
            try:
                async with self._sem:
                    self.counters.in_flight += 1
                    try:
                        async with asyncio.timeout(self.config.attempt_timeout):
                            await self._process(work)
                    finally:
                        self.counters.in_flight -= 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                if first_failed is None:
                    first_failed = self._clock()
                if is_transient(exc) and await self._retry_later(work, lane, tp, exc, first_failed):
                    continue
                try:
                    await self._park(work, exc)
                except Exception as park_exc:  # noqa: BLE001 - parking must succeed before moving on
                    self.counters.retried += 1
                    log.error("could not park tp=%s offset=%s: %r; retrying", tp, work.offset, park_exc)
                    await asyncio.sleep(self.config.backoff.base_delay)
                    continue
                self.counters.parked += 1
                self.failures.parked(tp, work.relation)
            else:
                self.counters.processed += 1
                self.failures.succeeded(tp, work.relation)
                self.backoff.record_success(work.relation)
                self._sync_outage()
            if lane.blocked:
                lane.blocked = False
                self.counters.blocked_keys -= 1
                self.failures.set_skipped(tp, work.relation, 0)
                if self.counters.blocked_keys == 0 and self.backoff.any_down:
                    # nothing left to probe the destination with: resume so new events do
                    self.backoff.end_outages()
                    self._sync_outage()
            return True

    async def _retry_later(
        self, work: Work, lane: _Lane, tp: Hashable, exc: Exception, first_failed: float
    ) -> bool:
        """Record a transient failure; sleep and return True to retry, False to park."""
        sink = exc.sink if isinstance(exc, SinkFailure) else "attempt"  # the attempt timed out
        self.backoff.record_failure(sink, work.relation)
        self._sync_outage()
        decision = self.backoff.decide(sink, work.attempts, work.relation, first_failed)
        if decision.park:
            log.warning("parking tp=%s offset=%s after %d attempts: %r", tp, work.offset, work.attempts, exc)
            return False
        self.counters.retried += 1
        now = self._clock()
        if not lane.blocked:
            lane.blocked = True
            self.counters.blocked_keys += 1
        blocked = BlockedKey(
            work.offset, work.attempts, now, now + decision.delay, repr(exc), sink, decision.down
        )
        self.failures.failed(tp, work.relation, blocked)
        self.failures.set_skipped(tp, work.relation, len(lane.queue) - 1)
        log.warning("transient failure (attempt %d, retry in %.2fs) tp=%s offset=%s: %r",
                    work.attempts, decision.delay, tp, work.offset, exc)  # fmt: skip
        await asyncio.sleep(decision.delay)
        return True

    def _finish(self, work: Work) -> None:
        tracker = self._trackers.get(work.tp)
        if tracker is None:
            return
        for released in tracker.finish(work.offset):
            released.ack()
            self.counters.acked += 1
        self._sync_pause(work.tp)

    # -- lifecycle -----------------------------------------------------------
    def revoke(self, tps: set[Hashable] | frozenset[Hashable]) -> int:
        """Forget the work of revoked partitions; it is redelivered to their new owner. Until
        a partition is assigned again, nothing of it is tracked (``owns``)."""
        dropped = sum(self._forget(tp) for tp in tps)
        self._unowned.update(tps)
        return dropped

    def assign(self, tps: set[Hashable] | frozenset[Hashable]) -> None:
        """Partitions (re)assigned to this worker: their consumption restarts from the
        committed offset, so any work still tracked from before is forgotten."""
        for tp in tps:
            self._forget(tp)
            self._unowned.discard(tp)

    def _forget(self, tp: Hashable) -> int:
        """Drop a partition's tracked work and lanes (never acked); returns how much."""
        self._revoked_epoch[tp] = self._revoked_epoch.get(tp, 0) + 1
        tracker = self._trackers.pop(tp, None)
        dropped = 0 if tracker is None else tracker.pending
        if tp in self._paused:
            self._paused.discard(tp)
            self._resume(tp)  # a no-op for a partition no longer assigned
        self.failures.drop(tp)
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
    def status(self) -> dict[str, Any]:
        """What operators see: counters, each partition's queues and pause state, each sink's health."""
        parts: dict[str, dict[str, Any]] = {}
        for tp, tracker in self._trackers.items():
            queues = self.failures.part(tp)
            parts[str(tp)] = {
                "pending": tracker.pending,
                "paused": tp in self._paused,
                "succeeded": queues.succeeded,
                "parked": queues.parked,
                "retries": queues.retries,
                "failed": {str(k): vars(b) for k, b in queues.failed.items()},
                "skipped": sum(queues.skipped.values()),
            }
        return {"counters": self.counters.snapshot(), "partitions": parts, "sinks": self.backoff.status()}
