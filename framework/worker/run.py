"""Run a Faust app as this process's worker (``converge worker MODULE:ATTR``): its event loop, its
bounded stop on a signal, its frozen start-up heap."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, NoReturn

import faust
from faust.types import AppT

from framework.worker.heap import GC_MODES, freeze_startup_heap

__all__ = ["use_event_loop", "run_worker", "stop_bound"]


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


def _exit_now(bound: float, log: logging.Logger) -> None:  # pragma: no cover - ends the process
    log.warning(
        "the stop did not finish within %.0f s (the consumer may be waiting on a rebalance): exiting "
        "without waiting longer; work not committed is redelivered from the last commit", bound,
    )  # fmt: skip
    logging.shutdown()
    os._exit(0)


class _Worker(faust.Worker):
    """A Faust worker that can freeze its start-up heap once the app has started, and whose stop
    on a signal is bounded: a stop stuck in a rebalance (aiokafka waits for its JoinGroup answer
    up to the rebalance timeout) exits the process after ``stop_bound`` seconds, with a warning
    and no traceback."""

    freeze_heap = True
    _stop_timer: threading.Timer | None = None

    def _schedule_shutdown(self, signal: Any) -> None:
        if self._stop_timer is None:
            bound = stop_bound(self.app)
            self._stop_timer = threading.Timer(bound, _exit_now, (bound, logging.getLogger(__name__)))
            self._stop_timer.daemon = True
            self._stop_timer.start()
        super()._schedule_shutdown(signal)

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
