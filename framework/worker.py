"""Run an app as a worker process (``converge worker MODULE:ATTR``)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from typing import Any, NoReturn

import faust
from faust.types import AppT

from framework.app import App
from framework.heap import GC_MODES, freeze_startup_heap
from framework.settings import Settings

__all__ = ["load_object", "load_converge_app", "load_app", "use_event_loop", "run_worker", "stop_bound"]


def load_object(spec: str) -> Any:
    """The object named ``MODULE:ATTR``, importing from the working directory too.

    ValueError for a malformed spec; ImportError/AttributeError name what is missing.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTR, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"module {module_name!r} has no attribute {attr!r}") from None


def load_converge_app(spec: str) -> App:
    """The converge ``App`` named ``MODULE:ATTR`` (an App, or a function returning one)."""
    obj = load_object(spec)
    app = obj if isinstance(obj, App) else obj() if callable(obj) else obj
    if not isinstance(app, App):
        raise TypeError(f"{spec} is not a converge App (got {type(app).__name__})")
    return app


def load_app(spec: str, settings: Settings | None = None) -> faust.App:
    """The Faust app of ``MODULE:ATTR``: a converge ``App`` (its worker, with ``settings``),
    a ``faust.App``, or a factory returning either."""
    obj = load_object(spec)
    if not isinstance(obj, App | faust.App) and callable(obj):
        obj = obj()
    if isinstance(obj, App):
        return obj.worker(settings)
    if not isinstance(obj, faust.App):
        raise TypeError(f"{spec} is neither a converge App nor a faust.App (got {type(obj).__name__})")
    return obj


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

    ``gc_mode`` is one of ``framework.heap.GC_MODES``: ``freeze`` (default) freezes the heap
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
