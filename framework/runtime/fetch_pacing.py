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

It also answers a fetch at once when only a few records arrived since the last one, so a
consumer that keeps up with a trickle of records fetches them a handful at a time, and pays
the fetch loop's fixed cost (requests, Faust's fetch loop and its tasks) for every handful.
``min_interval`` spaces the fetches to one node by at least that many seconds: a fetch that
comes back sooner waits out the rest, so the records of that interval come in one fetch (a
broker does the same when a consumer asks for ``fetch.min.bytes``). A fetch that brings a full
batch takes longer than the interval to process, so the pause only ever shortens idle turns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ["pace_empty_fetches"]

log = logging.getLogger(__name__)

_MARK = "_converge_paced"


def pace_empty_fetches(consumer: Any, idle_backoff: float, min_interval: float = 0.0) -> bool:
    """Wrap the aiokafka consumer's fetch step (once): ``idle_backoff`` seconds of pause after a
    fetch that brought nothing, and at least ``min_interval`` seconds from the start of one fetch
    to the next; False when it has no fetch step to wrap."""
    fetcher = getattr(consumer, "_fetcher", None)
    step = getattr(fetcher, "_proc_fetch_request", None)
    if fetcher is None or step is None or getattr(step, _MARK, False) or max(idle_backoff, min_interval) <= 0:
        return fetcher is not None and getattr(step, _MARK, False)

    async def paced(assignment: Any, node_id: Any, request: Any) -> bool:
        started = time.monotonic()
        got: bool = await step(assignment, node_id, request)
        pause = min_interval - (time.monotonic() - started) if got else idle_backoff
        if pause > 0:
            try:
                await asyncio.sleep(pause)
            except asyncio.CancelledError:  # closing or unassigned: like aiokafka's own step, no error
                return False
        return got

    setattr(paced, _MARK, True)
    fetcher._proc_fetch_request = paced
    return True
