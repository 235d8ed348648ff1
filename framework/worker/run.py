"""Run a Faust app as this process's worker (``converge worker MODULE:ATTR``): its event loop, its
bounded stop on a signal, its leaving of the consumer group, its frozen start-up heap."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any, NoReturn

import faust
from faust.types import AppT

from framework.kafka_admin import leave_group
from framework.runtime.group_rejoin import stop_joining
from framework.runtime.group_watch import member_client_id
from framework.worker.heap import GC_MODES, freeze_startup_heap

__all__ = ["use_event_loop", "run_worker", "stop_bound", "leave_own_group"]


def use_event_loop(name: str) -> None:
    """Run the worker's event loop on ``uvloop`` or the standard ``asyncio`` one.

    uvloop took the keyed runtime from about 6.4k to 7.7k events/s on the agent benchmark
    (BENCHMARKS.md); ValueError for another name, ImportError when uvloop is missing.
    """
    if name == "asyncio":
        return
    if name != "uvloop":
        raise ValueError(f"event loop: 'uvloop' or 'asyncio', not {name!r}")
    import asyncio

    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


#: Seconds a stop may take beyond the runtimes' drain timeout before the process exits anyway.
STOP_GRACE_S = 5.0


def stop_bound(app: AppT) -> float:
    """How long a signalled stop of ``app`` may take: the longest drain timeout of its runtimes
    (10 s without any) plus ``STOP_GRACE_S``."""
    wiring = getattr(app, "converge", None)
    drains = [r.config.drain_timeout for r in getattr(wiring, "runtimes", ())]
    return max(drains, default=10.0) + STOP_GRACE_S


#: Seconds the last leaving of the group (``leave_own_group``) may take.
LEAVE_TIMEOUT_S = 5.0


async def leave_own_group(app: AppT, log: logging.Logger) -> list[str]:
    """Remove from the app's consumer group every member of this process (its consumer's client id
    is ``group_watch.member_client_id()``, unique to it; nothing is done under any other), whatever
    the group's state: the member ids removed. The last step of a stop, after the consumer's close:
    a member that close left behind (a stop in the middle of a rebalance, a join the broker holds)
    would hold its partitions, or the next rebalance, until someone removes it; noida-db never
    evicts it."""
    client = getattr(app.conf, "broker_client_id", None)
    urls = [u for u in app.conf.broker if u.scheme == "kafka"]
    if client != member_client_id() or not urls:
        return []
    broker = ",".join(f"{u.host}:{u.port or 9092}" for u in urls)
    try:
        removed = await asyncio.wait_for(leave_group(broker, app.conf.id, client), LEAVE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - stopping: say so and go on
        log.warning("could not check that this worker left group %r: %r", app.conf.id, exc)
        return []
    if removed:
        log.warning("group %r: the consumer's close left member(s) %s of this worker: removed them",
                    app.conf.id, ", ".join(removed))  # fmt: skip
    return removed


def _exit_now(app: AppT, bound: float, log: logging.Logger) -> None:  # pragma: no cover - ends the process
    log.warning(
        "the stop did not finish within %.0f s (the consumer may be waiting on a rebalance): exiting "
        "without waiting longer; work not committed is redelivered from the last commit", bound,
    )  # fmt: skip
    try:
        asyncio.run(leave_own_group(app, log))
    finally:
        logging.shutdown()
        os._exit(0)


class _Worker(faust.Worker):
    """A Faust worker that can freeze its start-up heap once the app has started, and whose stop
    on a signal is bounded: a stop stuck in a rebalance (aiokafka waits for its JoinGroup answer
    up to the rebalance timeout) exits the process after ``stop_bound`` seconds, with a warning
    and no traceback. Either way the process leaves its consumer group before it exits
    (``leave_own_group``)."""

    freeze_heap = True
    _stop_timer: threading.Timer | None = None

    def _schedule_shutdown(self, signal: Any) -> None:
        # a rebalance during the stop: leave rather than join a generation only to leave it
        consumer = getattr(getattr(self.app.consumer, "_thread", None), "_consumer", None)
        stop_joining(getattr(consumer, "_coordinator", None))
        if self._stop_timer is None:
            bound = stop_bound(self.app)
            args = (self.app, bound, logging.getLogger(__name__))
            self._stop_timer = threading.Timer(bound, _exit_now, args)
            self._stop_timer.daemon = True
            self._stop_timer.start()
        super()._schedule_shutdown(signal)

    def _shutdown_loop(self) -> None:
        if not self.loop.is_closed():
            self.loop.run_until_complete(leave_own_group(self.app, logging.getLogger(__name__)))
        super()._shutdown_loop()

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        if self.freeze_heap:
            frozen = freeze_startup_heap()
            self.log.info("froze %d start-up objects out of full collections", frozen)


def run_worker(app: faust.App, loglevel: str = "warning", gc_mode: str = "freeze") -> NoReturn:
    """Run ``app`` until SIGINT/SIGTERM or a crash; exits the process with the worker's code.

    ``gc_mode`` is one of ``framework.worker.heap.GC_MODES``: ``freeze`` (default) freezes the heap
    once the app has started, ``default`` leaves the garbage collector alone."""
    if gc_mode not in GC_MODES:
        raise ValueError(f"gc mode: one of {GC_MODES}, not {gc_mode!r}")
    worker = _Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    worker.freeze_heap = gc_mode == "freeze"
    # Faust's terminal spinner sets the root logger to DEBUG (so every debug call in aiokafka
    # builds a record); a worker writes to a log, not a terminal.
    worker.spinner = None
    worker.execute_from_commandline()
    raise SystemExit(0)  # pragma: no cover - execute_from_commandline exits
