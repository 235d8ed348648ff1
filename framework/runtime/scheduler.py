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
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.runtime.backoff import AdaptiveBackoff, BackoffConfig
from framework.runtime.counters import Counters
from framework.runtime.errors import SinkFailure, is_transient
from framework.runtime.failures import BlockedKey, FailureBook
from framework.runtime.offsets import OffsetTracker
from framework.runtime.sinks import Probe
from framework.runtime.work import Work

__all__ = ["KeyedScheduler", "SchedulerConfig"]

log = logging.getLogger(__name__)

#: Why a blocked key's retry sleep ended: its delay passed, a probe found its sink answering (this
#: key retries as the confirming attempt), or its sink's outage ended (every key retries).
Wake = str
_TIMER: Wake = "timer"
_PROBE: Wake = "probe"
_RECOVERED: Wake = "recovered"


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
    - ``probes``: per sink name, a cheap health check (``sinks.Probe``; default: the
      ``probes`` of ``process`` when it has them). While a sink with a probe is down it is
      probed every ``backoff.probe_interval`` s; an answer wakes one key blocked on it at
      once, as the confirming attempt. Whenever a sink's outage ends (that attempt, or any
      success), every key blocked on it retries at once with a fresh back-off, and the
      paused partitions resume.
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
        probes: Mapping[str, Probe] | None = None,
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
        if probes is None:
            probes = getattr(process, "probes", None) or {}
        self._probes: dict[str, Probe] = dict(probes)
        self._down: frozenset[str] = frozenset()
        #: per sink, the keys sleeping out a retry delay after failing at it: their wake-ups
        self._sleepers: dict[str, dict[tuple[Hashable, Hashable], asyncio.Future[Wake]]] = {}
        self._prober: asyncio.Task[None] | None = None
        self._probe_stats: dict[str, dict[str, Any]] = {}

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

    def finish_written(self, works: Sequence[Work], generations: Mapping[int, int]) -> None:
        """``finish`` of every one of ``works`` (written together in a batch; ``generations`` by
        ``id(work)``), with each partition's acknowledgements released and its pause state
        settled once for the batch instead of once a message."""
        by_tp: dict[Hashable, list[Work]] = {}
        revoked = self._revoked_epoch
        for work in works:
            if revoked.get(work.tp, 0) == generations[id(work)]:
                by_tp.setdefault(work.tp, []).append(work)
        for tp, done in by_tp.items():
            self.counters.processed += len(done)
            self.failures.succeeded_many(tp, [w.relation for w in done])
            self._release(tp, [w.offset for w in done])

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
        sinks = self.backoff.down_sinks()
        recovered, self._down = self._down - sinks, sinks
        down = bool(sinks)
        if down != self._outage:
            self._outage = down
            log.warning("destination %s: %s consumption", "down" if down else "back",
                        "pausing" if down else "resuming")  # fmt: skip
            for tp in list(self._trackers):
                self._sync_pause(tp)
        for sink in recovered:  # every key blocked on it retries now, not after its back-off
            self._wake(sink, _RECOVERED)
        if any(sink in self._probes for sink in sinks) and (self._prober is None or self._prober.done()):
            self._prober = asyncio.ensure_future(self._probe_while_down())

    # -- probing -------------------------------------------------------------
    def _wake(self, sink: str, why: Wake, *, one: bool = False) -> int:
        """End the retry sleep of the keys blocked on ``sink`` (only the one with the lowest
        offset when ``one``); how many woke."""
        sleepers = self._sleepers.get(sink)
        if not sleepers:
            return 0
        chosen = list(sleepers.items())
        if one:  # the earliest blocked event: the one the commit point waits for
            chosen = [min(chosen, key=lambda kv: self._head_offset(kv[0]))]
        woke = 0
        for lane_key, fut in chosen:
            if not fut.done():
                fut.set_result(why)
                woke += 1
            sleepers.pop(lane_key, None)
        return woke

    def _head_offset(self, lane_key: tuple[Hashable, Hashable]) -> int:
        lane = self._lanes.get(lane_key)
        return lane.queue[0].offset if lane is not None and lane.queue else 0

    async def _probe_while_down(self) -> None:
        """While a sink with a probe is down: probe it every ``probe_interval`` s; an answer
        wakes one of its blocked keys, whose attempt confirms (its success ends the outage)."""
        c = self.config.backoff
        try:
            while True:
                sinks = [s for s in self.backoff.down_sinks() if s in self._probes]
                if not sinks:
                    return
                for sink in sinks:
                    if await self._probe(sink, c.probe_timeout) and self.backoff.is_down(sink):
                        if self._wake(sink, _PROBE, one=True):
                            log.info("destination %s answers a probe: retrying a blocked key now", sink)
                await asyncio.sleep(c.probe_interval)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here: crash rather than stay paused for ever
            log.exception("probing crashed")
            self.counters.crashes += 1
            self._crash(exc)

    async def _probe(self, sink: str, timeout: float) -> bool:
        stats = self._probe_stats.setdefault(sink, {"probes": 0, "answered": 0, "last_answer": None})
        stats["probes"] += 1
        try:
            async with asyncio.timeout(timeout):
                ok = bool(await self._probes[sink]())
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failing probe is a sink that does not answer yet
            ok = False
        if ok:
            stats["answered"] += 1
            stats["last_answer"] = self._clock()
        return ok

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
        streak = 0  # attempts since the first failure, or since the failing sink came back
        while True:
            if self._revoked_epoch.get(tp, 0) != epoch:
                return False
            work.attempts += 1
            streak += 1
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
                if is_transient(exc):
                    woke = await self._retry_later(work, lane, tp, exc, first_failed, streak)
                    if woke == _RECOVERED:  # the sink is back: a fresh back-off and evidence window
                        first_failed, streak = None, 0
                    if woke is not None:
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
        self, work: Work, lane: _Lane, tp: Hashable, exc: Exception, first_failed: float, streak: int
    ) -> Wake | None:
        """Record a transient failure; sleep and return why it woke (retry), or None to park.
        ``streak``: the attempts that count for the delay and for parking."""
        sink = exc.sink if isinstance(exc, SinkFailure) else "attempt"  # the attempt timed out
        self.backoff.record_failure(sink, work.relation)
        self._sync_outage()
        decision = self.backoff.decide(sink, streak, work.relation, first_failed)
        if decision.park:
            log.warning("parking tp=%s offset=%s after %d attempts: %r", tp, work.offset, work.attempts, exc)
            return None
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
        return await self._sleep((tp, work.relation), sink, decision.delay)

    async def _sleep(self, lane_key: tuple[Hashable, Hashable], sink: str, delay: float) -> Wake:
        """Sleep ``delay`` s, or until ``_wake`` ends it (``sink`` answers a probe or is back)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Wake] = loop.create_future()
        sleepers = self._sleepers.setdefault(sink, {})
        sleepers[lane_key] = fut
        timer = loop.call_later(delay, _settle, fut, _TIMER)
        try:
            return await fut
        finally:
            timer.cancel()
            if sleepers.get(lane_key) is fut:
                del sleepers[lane_key]

    def _finish(self, work: Work) -> None:
        self._release(work.tp, [work.offset])

    def _release(self, tp: Hashable, offsets: list[int]) -> None:
        """Mark ``offsets`` of ``tp`` finished, acknowledge the contiguous prefix now finished,
        and settle the partition's pause state."""
        tracker = self._trackers.get(tp)
        if tracker is None:
            return
        released = tracker.finish_many(offsets)
        for work in released:
            work.ack()
        self.counters.acked += len(released)
        self._sync_pause(tp)

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
        """Cancel every lane and the probing (unfinished work is not acked and will be redelivered)."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        if self._prober is not None:
            tasks.append(self._prober)
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
        sinks = self.backoff.status()
        for sink, stats in self._probe_stats.items():
            sinks.setdefault(sink, {})["probe"] = dict(stats)
        return {"counters": self.counters.snapshot(), "partitions": parts, "sinks": sinks}


def _settle(fut: asyncio.Future[Wake], why: Wake) -> None:
    if not fut.done():
        fut.set_result(why)
