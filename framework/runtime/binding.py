"""Binds a KeyedAgent to a Faust app: micro-batches of its topic into the KeyedScheduler.

With the worker's ``HandoverConsumer`` the messages come straight from the fetch loop through
the runtime's ``Intake``; with any other Faust consumer, from the agent's noack stream.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import faust
import mode
from aiokafka import TopicPartition

from framework.dlq import DeadLetterWAL, ParkedRecord
from framework.runtime.batch import Batches
from framework.runtime.committed_seek import seek_committed_everywhere
from framework.runtime.counters import Counters
from framework.runtime.dedupe import DedupeConfig
from framework.runtime.errors import error_class, stage_of
from framework.runtime.fetch_pacing import pace_empty_fetches
from framework.runtime.group_rejoin import leave_before_rejoin
from framework.runtime.group_watch import GroupWatch, member_client_id, run_with
from framework.runtime.handover import route, routed
from framework.runtime.intake import Intake
from framework.runtime.metadata_wait import bound_metadata_wait
from framework.runtime.processor import Processor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.work import Work

#: Acknowledges one message (``Consumer.ack`` or a Faust event's ``ack``).
Acknowledge = Callable[[], Any]

__all__ = ["RuntimeConfig", "AgentRuntime", "register_dlq_rotation", "watch_group"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuntimeConfig:
    """Micro-batching and bounds of one agent's runtime.

    ``max_batch``/``within``: the size of a micro-batch and the longest wait for it to
    fill (a batch is one durable store transaction: SQLite writes each page a commit touches
    once, so a larger batch writes fewer bytes per event; its notification entries split a
    long key list, ``notifications.entries``; the intake holds two batches, or Faust's
    ``stream_buffer_maxsize`` when that is more).
    ``sink_timeout``: bound on each sink call. ``drain_timeout``: how long shutdown waits for
    running work before leaving the rest to redelivery. ``idle_fetch_backoff``: pause
    after a fetch that brought nothing, ``fetch_min_interval``: shortest time from one
    fetch to the next (both ``fetch_pacing``; 0 turns each off).
    ``group_join_timeout``: how long the worker may wait for its first partition
    assignment before it logs, every such period, that its consumer group is
    stuck (0 turns the check off). ``metadata_wait``: bound on the group leader's wait for
    cluster metadata while it joins (``metadata_wait``). ``dedupe``: skip exact duplicates of events
    applied recently (``dedupe.DuplicateFilter``, per agent under the data dir);
    None (the default) writes every delivery.
    """

    max_batch: int = 4000
    within: float = 0.05
    sink_timeout: float = 10.0
    drain_timeout: float = 10.0
    idle_fetch_backoff: float = 0.02
    fetch_min_interval: float = 0.01
    group_join_timeout: float = 60.0
    metadata_wait: float = 30.0
    group_watch_period: float = 5.0
    stall_after: float = 30.0
    dedupe: DedupeConfig | None = None
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)


class AgentRuntime:
    """Runs one KeyedAgent inside a Faust app with ordered, at-least-once acks."""

    def __init__(
        self,
        app: faust.App,
        topic: str,
        processor: Processor | None = None,
        dlq: DeadLetterWAL | None = None,
        config: RuntimeConfig | None = None,
        *,
        name: str | None = None,
    ) -> None:
        """Consume ``topic`` with ``processor``; bad messages park in ``dlq`` under
        ``name`` (default the processor's). Both may be attached later (``attach``),
        before the worker starts consuming."""
        if name is None and processor is None:
            raise TypeError("AgentRuntime needs a processor or a name")
        self.app = app
        self.name: str = name or processor.name  # type: ignore[union-attr]
        self.config = config or RuntimeConfig()
        self.counters = Counters()
        self.processor: Processor | None = processor
        self.dlq: DeadLetterWAL | None = dlq
        self.topic_name = topic
        self.topic = app.topic(
            topic,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
        )
        self.scheduler: KeyedScheduler | None = None
        # Faust's stream buffer bound, so that the intake holds back fetching as the stream would,
        # and room for the next micro-batch while one is processed
        self.intake = Intake(max(int(app.conf.stream_buffer_maxsize), 2 * self.config.max_batch))
        route(app, topic, self.intake)
        self._assigned_once = False
        self._waiting_since: float | None = None
        self.faust_agent = app.agent(
            self.topic,
            name=f"converge.{self.name}",
            supervisor_strategy=mode.CrashingSupervisor,
        )(self._consume)
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]
        app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]
        self.group_watch = watch_group(app, topic, self.config)

    def status(self) -> dict[str, Any]:
        """The scheduler's status (counters, queues per partition, sink health; counters only
        before the agent started) and ``unassigned_s``: seconds the consumer has been waiting
        for its first assignment (None once it had one)."""
        out: dict[str, Any]
        if self.scheduler is None:
            out = {"counters": self.counters.snapshot(), "partitions": {}, "sinks": {}}
        else:
            out = self.scheduler.status()
        dedupe = getattr(self.processor, "dedupe", None)
        if dedupe is not None:
            out["counters"]["duplicates_skipped"] = dedupe.skipped
        resolve = getattr(self.processor, "resolve", None) or getattr(getattr(self.processor, "book", None),
                                                                     "resolve", None)  # fmt: skip
        if resolve is not None:  # ID mutation: owner ids resolved, writes of deleted owners dropped
            out["counters"].update(resolve.counters())
        join_status = getattr(self.processor, "join_status", None)  # lookups: pending, re-mapped
        if join_status is not None:
            out["joins"] = join_status()
        if self.group_watch is not None:
            out["group"] = self.group_watch.status(self.topic_name)
        waiting = self._waiting_since
        out["unassigned_s"] = None if waiting is None else round(time.monotonic() - waiting, 1)
        return out

    def attach(self, processor: Processor, dlq: DeadLetterWAL) -> None:
        """Set the processor and the dead-letter WAL (when they open with the worker)."""
        self.processor, self.dlq = processor, dlq

    # -- scheduler callbacks --------------------------------------------------
    async def _park(self, work: Work, exc: BaseException) -> None:
        tp: Any = work.tp
        assert self.dlq is not None
        await self.dlq.park(
            ParkedRecord(
                pipeline=self.name,
                topic=tp.topic,
                partition=tp.partition,
                offset=work.offset,
                key=work.key,
                value=work.value,
                stage=stage_of(exc),
                error_class=error_class(exc),
                error=str(exc),
                parked_at=time.time(),
                event_type=work.event.type if work.event is not None else "unknown",
            )
        )
        log.warning("parked %s[%s]@%s: %s", tp.topic, tp.partition, work.offset, exc)

    # Faust's own pause_partitions only filters records it has already taken from
    # aiokafka: records of a partition paused mid-batch are dropped while aiokafka's
    # position has moved past them, and a later commit skips them. Pausing in aiokafka
    # itself keeps its position at the last record handed out, so nothing is skipped.
    def _pause(self, tp: Any) -> None:
        asyncio.ensure_future(self._fetch_control(tp, pause=True))

    def _resume(self, tp: Any) -> None:
        asyncio.ensure_future(self._fetch_control(tp, pause=False))

    async def _fetch_control(self, tp: Any, *, pause: bool) -> None:
        thread = getattr(self.app.consumer, "_thread", None)
        if thread is None or not hasattr(thread, "_ensure_consumer"):
            log.warning("consumer has no aiokafka thread: cannot %s %s", "pause" if pause else "resume", tp)
            return
        target = TopicPartition(tp.topic, tp.partition)

        async def control() -> None:
            consumer = thread._ensure_consumer()
            if target not in consumer.assignment():
                return
            if pause:
                consumer.pause(target)
            else:
                consumer.resume(target)

        try:
            await thread.call_thread(control)
        except Exception as exc:  # noqa: BLE001 - a stopped consumer: nothing to pause
            log.warning("could not %s %s: %r", "pause" if pause else "resume", tp, exc)

    def _crash(self, exc: BaseException) -> None:
        asyncio.ensure_future(self.app.crash(exc))

    def _rebalanced(self) -> None:
        hook = getattr(self.processor, "on_rebalance", None)
        if hook is not None:
            hook()

    def _on_assigned(self, sender: Any, assigned: set[Any], **kwargs: Any) -> None:
        self._assigned_once, self._waiting_since = True, None
        self._rebalanced()
        if self.scheduler is not None:
            self.scheduler.assign({tp for tp in assigned if tp.topic == self.topic_name})
        self._fix_consumer()

    def _fix_consumer(self) -> None:
        """The aiokafka fixes the runtime relies on, applied once each to Faust's consumer (each
        a no-op where its part is missing): seeks to the committed offsets also where there is
        none, paced empty fetches, rejoins that leave no member behind, a bounded metadata wait."""
        thread = getattr(self.app.consumer, "_thread", None)
        consumer = getattr(thread, "_consumer", None)
        seek_committed_everywhere(thread)
        pace_empty_fetches(consumer, self.config.idle_fetch_backoff, self.config.fetch_min_interval)
        leave_before_rejoin(getattr(consumer, "_coordinator", None))
        bound_metadata_wait(getattr(consumer, "_client", None), self.config.metadata_wait)

    def _on_revoked(self, sender: Any, revoked: set[Any], **kwargs: Any) -> None:
        # before every join, the first one too: a stop then leaves also the member it is joining as
        leave_before_rejoin(getattr(getattr(getattr(self.app.consumer, "_thread", None), "_consumer", None),
                                    "_coordinator", None))  # fmt: skip
        self._rebalanced()
        mine = {tp for tp in revoked if tp.topic == self.topic_name}
        self.intake.drop(mine)  # never acked: fetched again by the partitions' next owners
        if self.scheduler is not None:
            dropped = self.scheduler.revoke(mine)
            if dropped:
                log.warning("revoked %d partitions; %d unfinished left to redelivery", len(mine), dropped)

    # -- the agent body -------------------------------------------------------
    async def _consume(self, stream: faust.StreamT[Any]) -> None:
        processor = self.processor
        if processor is None or self.dlq is None:
            raise RuntimeError(f"{self.name}: no processor attached before the worker started")
        sched = self.scheduler = KeyedScheduler(
            processor,
            self._park,
            config=self.config.scheduler,
            pause=self._pause,
            resume=self._resume,
            crash=self._crash,
            counters=self.counters,
        )
        consumer = self.app.consumer
        if isinstance(processor, ProjectionProcessor):  # its skip of identical rewrites reads it
            processor.highwater = consumer.highwater
        watch = asyncio.ensure_future(self._watch_group_join())
        direct, strays = routed(self.app, self.topic_name, self.intake), None
        if direct:
            strays = asyncio.ensure_future(self.intake.put_all(stream.noack().events()))  # type: ignore[attr-defined]
        # A micro-batch is written while the next one is taken from the stream (and mapped, and
        # partly written, for a processor that maps ahead: ``framework.runtime.batch.Batches``).
        batches = Batches(sched, processor, self._park)
        try:
            async for batch in self._batches(stream, direct):
                self.counters.batches += 1
                self.counters.last_batch_size = len(batch)
                last: dict[Any, int] = {}
                works = []
                for msg, ack in batch:
                    if not self._fresh(msg, sched):
                        self.counters.stale_dropped += 1  # never acked: redelivered after the rebalance
                        continue
                    work = Work(msg.tp, msg.offset, msg.key, msg.value, ack=ack, epoch=sched.epoch(msg.tp))
                    work.headers = msg.headers or ()  # for a decoder (framework.decoders)
                    work.timestamp = msg.timestamp and round(msg.timestamp * 1000)
                    processor.prepare(work)
                    works.append(work)
                    last[msg.tp] = msg.offset
                await batches.run(works)  # a bug in an earlier batch re-raises here and crashes the worker
                self.counters.lag = _batch_lag(consumer, last)
        finally:
            watch.cancel()
            if strays is not None:
                strays.cancel()
            await batches.settle(self.config.drain_timeout)
            finished = await sched.drain(self.config.drain_timeout)
            if not finished:
                log.warning("stopping with unfinished work; it is redelivered from the last commit")
            await sched.close()

    async def _batches(
        self, stream: faust.StreamT[Any], direct: bool
    ) -> AsyncIterator[list[tuple[Any, Acknowledge]]]:
        """Micro-batches of (message, its acknowledgement): from the intake when the consumer
        hands this topic's messages over (``direct``), else (another consumer, or a topic several runtimes
        consume) from the agent's noack stream. With the intake, a message that still reached
        the stream (a fetch loop whose call the consumer did not recognise) joins the intake
        (``_consume``'s ``strays``), so nothing waits unread in the stream."""
        consumer, size, within = self.app.consumer, self.config.max_batch, self.config.within
        if direct:
            while True:
                messages = await self.intake.take(size, within)
                yield [(m, functools.partial(consumer.ack, m)) for m in messages]
        async for events in stream.noack().noack_take(size, within):  # type: ignore[attr-defined]
            yield [(e.message, e.ack) for e in events]

    async def _watch_group_join(self) -> None:
        """Log an error, every ``group_join_timeout``, while no assignment ever arrived: the
        consumer never completed joining its group (on the embedded broker, typically a
        member killed with SIGKILL that the broker never evicts)."""
        period = self.config.group_join_timeout
        if period <= 0 or self._assigned_once:
            return
        self._waiting_since = time.monotonic()
        while not self._assigned_once:
            await asyncio.sleep(period)
            if self._assigned_once:
                return
            waited = time.monotonic() - (self._waiting_since or time.monotonic())
            log.error(
                "%s: no partitions assigned after %.0f s: the consumer group %r has not completed a "
                "rebalance. A member that died without leaving (kill -9) may still hold it; a real "
                "Kafka evicts it after the session timeout, the embedded noida-db never does: "
                "restart noida-db or use a new group id",
                self.name, waited, self.app.conf.id,
            )  # fmt: skip
            self.counters.group_join_stalls += 1

    def _fresh(self, message: Any, sched: KeyedScheduler) -> bool:
        """False for a record taken before a rebalance that reached the batch after it: its
        partition is revoked, the consumer is between generations, or it was fetched in an
        older generation than the current one."""
        app = self.app
        return (
            sched.owns(message.tp)
            and app.flow_control.is_active()
            and getattr(message, "generation_id", None) in (None, app.consumer_generation_id)
        )


_WATCH = "_converge_group_watch"


def watch_group(app: faust.App, topic: str, config: RuntimeConfig) -> GroupWatch | None:
    """The worker's ``GroupWatch`` (one per Faust app, started with it), now also reading
    ``topic``; None when the period is 0 or the app has no Kafka broker. The first call names
    the app's consumer (``group_watch.member_client_id``), so that the watch of any worker of
    this host can tell a dead member of the group from a live one."""
    watch: GroupWatch | None = getattr(app, _WATCH, None)
    if watch is None:
        urls = [u for u in app.conf.broker if u.scheme == "kafka"]
        if config.group_watch_period <= 0 or not urls:
            return None
        client = app.conf.broker_client_id = member_client_id()

        def own() -> tuple[str, str | None]:
            coordinator = getattr(getattr(getattr(app.consumer, "_thread", None), "_consumer", None),
                                  "_coordinator", None)  # fmt: skip
            return client, getattr(coordinator, "member_id", None) or None

        watch = GroupWatch(",".join(f"{u.host}:{u.port or 9092}" for u in urls), app.conf.id,
                           period=config.group_watch_period, stall_after=config.stall_after,
                           own=own)  # fmt: skip
        setattr(app, _WATCH, watch)
        run_with(app, watch)  # from the app's start: an app task would wait for an assignment
    watch.add_topic(topic)
    return watch


def _batch_lag(consumer: Any, last: dict[Any, int]) -> int:
    """Messages after the last offset of each partition in a batch, by the consumer's high
    watermarks; a partition revoked since the batch was taken counts 0 (aiokafka asserts on it)."""
    total = 0
    for tp, off in last.items():
        try:
            end = consumer.highwater(tp) or 0
        except AssertionError:  # no longer assigned: a rebalance completed meanwhile
            continue
        total += max(0, end - off - 1)
    return total


def register_dlq_rotation(
    app: faust.App, dlq: DeadLetterWAL | Callable[[], DeadLetterWAL | None], rotate_every: float = 60.0
) -> None:
    """Seal idle dead-letter segments periodically so they become replayable.

    ``dlq`` is the WAL, or a callable returning it (None while it is not open)."""

    @app.timer(rotate_every, name="converge.dlq.rotate")  # type: ignore[untyped-decorator]
    async def rotate() -> None:
        wal = dlq() if callable(dlq) else dlq
        if wal is not None:
            await wal.rotate()
