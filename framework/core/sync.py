"""Call async APIs from blocking code."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result (or raise its exception).

    Without a running event loop in this thread it uses ``asyncio.run``. Inside
    a running loop (which cannot be re-entered) it runs the coroutine on a new
    loop in a helper thread and blocks this thread until it is done, so the
    coroutine must not need the caller's loop (e.g. a client bound to it).
    """
    if not asyncio.iscoroutine(coro):
        raise TypeError(f"run_sync expects a coroutine, got {type(coro).__name__}")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="converge-run-sync") as helper:
        return helper.submit(asyncio.run, coro).result()
