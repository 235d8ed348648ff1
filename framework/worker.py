"""Run a Faust app as a worker process (``converge worker MODULE:ATTR``)."""

from __future__ import annotations

import importlib
from typing import NoReturn

import faust

__all__ = ["load_app", "run_worker"]


def load_app(spec: str) -> faust.App:
    """Import ``module:attr``; call ``attr()`` when it is a factory rather than an App."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"app spec must be 'module:attr', got {spec!r}")
    obj = getattr(importlib.import_module(module_name), attr)
    app = obj if isinstance(obj, faust.App) else obj()
    if not isinstance(app, faust.App):
        raise TypeError(f"{spec} did not give a faust.App (got {type(app).__name__})")
    return app


def run_worker(app: faust.App, loglevel: str = "warning") -> NoReturn:
    """Run ``app`` until SIGINT/SIGTERM or a crash; exits the process with the worker's code."""
    worker = faust.Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    # Faust's terminal spinner sets the root logger to DEBUG (so every debug call in aiokafka
    # builds a record); a worker writes to a log, not a terminal.
    worker.spinner = None
    worker.execute_from_commandline()
    raise SystemExit(0)  # pragma: no cover - execute_from_commandline exits
