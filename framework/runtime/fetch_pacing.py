"""Pacing of empty fetches: a consumer waits a little after a fetch that brought nothing.

A Kafka broker holds a fetch until data arrives or ``fetch.max.wait.ms``
passes, so an idle consumer sends a few requests a second. The embedded
broker (noida-db 0.2) answers at once, whatever the wait and minimum bytes
asked: an idle aiokafka consumer then sends fetches in a tight loop and
spends about 80 % of a core on it (measured: 3.2 s of CPU in 4 s, with
``fetch_max_wait_ms`` 500 or 1500 and ``fetch_min_bytes`` 1 or 10000), CPU
the worker's own threads need. After an empty fetch the consumer here
sleeps ``idle_backoff`` seconds before it may send the next one to that
node; against a real broker that honours the wait this changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["pace_empty_fetches"]

log = logging.getLogger(__name__)

_MARK = "_converge_paced"


def pace_empty_fetches(consumer: Any, idle_backoff: float) -> bool:
    """Wrap the aiokafka consumer's fetch step (once); False when it has none to wrap."""
    fetcher = getattr(consumer, "_fetcher", None)
    step = getattr(fetcher, "_proc_fetch_request", None)
    if fetcher is None or step is None or getattr(step, _MARK, False) or idle_backoff <= 0:
        return fetcher is not None and getattr(step, _MARK, False)

    async def paced(assignment: Any, node_id: Any, request: Any) -> bool:
        got: bool = await step(assignment, node_id, request)
        if not got:
            try:
                await asyncio.sleep(idle_backoff)
            except asyncio.CancelledError:  # closing or unassigned: like aiokafka's own step, no error
                return False
        return got

    setattr(paced, _MARK, True)
    fetcher._proc_fetch_request = paced
    return True
