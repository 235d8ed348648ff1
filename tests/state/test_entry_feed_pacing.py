"""An idle entry feed (a lookup topic, or the ID map) does not poll noida-db in a tight loop.

noida-db answers a fetch at once even when it has nothing, so an unpaced aiokafka consumer sends
fetches back to back and takes CPU the worker's agents need (the demo lost ~40 % of its
throughput to the ID map's feed before it was paced). Real broker, real consumer; the fetch
step is counted by wrapping it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from framework.kafka_admin import ensure_topics
from framework.local_stack import StackInfo
from framework.state import Lookup
from framework.state.entries import EntryTables
from framework.state.feed import EntryFeed


async def _fetches_in(stack: StackInfo, seconds: float, idle_backoff: float) -> int:
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    await ensure_topics(broker, {topic: 2})
    lookup = Lookup("idle", topic, key=lambda e: e.payload.get("k"), value=lambda e: {})

    async def unchanged(keys: list[tuple[str, str]]) -> None:
        return None

    feed = EntryFeed(broker, EntryTables([lookup]), unchanged, idle_backoff=idle_backoff)
    await feed.start()
    fetcher: Any = feed.consumer._fetcher  # type: ignore[union-attr]  # noqa: SLF001
    step, calls = fetcher._proc_fetch_request, [0]

    async def counted(*args: Any) -> Any:
        calls[0] += 1
        return await step(*args)

    fetcher._proc_fetch_request = counted
    task = asyncio.ensure_future(feed.run())
    try:
        await asyncio.sleep(seconds)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await feed.stop()
    return calls[0]


async def test_an_idle_feed_fetches_a_few_times_a_second_not_in_a_tight_loop(stack: StackInfo) -> None:
    paced = await _fetches_in(stack, 1.0, idle_backoff=0.1)
    unpaced = await _fetches_in(stack, 1.0, idle_backoff=0)
    assert paced <= 30, paced
    assert unpaced > 5 * paced, (unpaced, paced)  # what the pacing is for, on this broker
