"""Awaiting the driver's ResponseFuture from asyncio.

``Session.execute_async`` returns a ``ResponseFuture`` whose callbacks run on
the driver's event-loop thread; they hand the outcome to the asyncio loop with
``call_soon_threadsafe``. Each wait has its own timeout, on top of the
driver's request timeout, so a lost callback cannot hang the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stores.cassandra.error_map import reraise
from stores.errors import TransientStoreError

__all__ = ["Page", "execute", "GRACE_S"]

#: Extra seconds the asyncio side waits beyond the driver's own request timeout.
GRACE_S = 2.0


@dataclass(frozen=True)
class Page:
    """One page of a result: its rows (empty for writes) and the state to fetch the next page."""

    rows: list[Any]
    paging_state: bytes | None = None


def _settle(waiter: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if waiter.done():
        return
    if ok:
        waiter.set_result(value)
        return
    try:
        waiter.set_exception(value)
    except TypeError:  # not raisable into a future (e.g. StopIteration): keep it as the cause
        err = RuntimeError(f"driver callback failed: {value!r}")
        err.__cause__ = value if isinstance(value, BaseException) else None
        waiter.set_exception(err)


def _handoff(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any], ok: bool) -> Callable[[Any], None]:
    def deliver(value: Any) -> None:
        try:
            loop.call_soon_threadsafe(_settle, waiter, ok, value)
        except RuntimeError:  # the loop was closed while the request was in flight
            pass

    return deliver


async def execute(
    session: Any,
    statement: Any,
    *,
    timeout: float,
    what: str,
    paging_state: bytes | None = None,
) -> Page:
    """Run ``statement`` on ``session`` and return its first (or ``paging_state``'s) page.

    Driver failures become TransientStoreError / PermanentStoreError (see
    ``stores.cassandra.error_map``); the wait itself is bounded by ``timeout + GRACE_S``.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[Any] = loop.create_future()
    try:
        future = session.execute_async(statement, timeout=timeout, paging_state=paging_state)
        future.add_callbacks(_handoff(loop, waiter, True), _handoff(loop, waiter, False))
        await asyncio.wait_for(waiter, timeout + GRACE_S)
    except asyncio.CancelledError:
        raise
    except TimeoutError as exc:
        raise TransientStoreError(f"{what}: no answer within {timeout + GRACE_S:.1f}s") from exc
    except Exception as exc:
        reraise(exc, what)
    result = future.result()  # already complete: returns the ResultSet without blocking
    return Page(list(result.current_rows), result.paging_state)
