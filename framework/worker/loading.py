"""Load what ``MODULE:ATTR`` names: any object, a converge ``App``, or the Faust app to run."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import faust

from framework.app import App
from framework.settings import Settings

__all__ = ["load_object", "load_converge_app", "load_app"]


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
    from framework.worker.wiring import build_worker  # not for load_converge_app: Spark loads apps too

    obj = load_object(spec)
    if not isinstance(obj, App | faust.App) and callable(obj):
        obj = obj()
    if isinstance(obj, App):
        return build_worker(obj, settings)
    if not isinstance(obj, faust.App):
        raise TypeError(f"{spec} is neither a converge App nor a faust.App (got {type(obj).__name__})")
    return obj
