"""Empty-fetch pacing, on a stand-in for aiokafka's fetcher (its one method the pacing wraps).

The real fetcher runs under every worker of the integration tests; here the
wrapper's own rules are pinned: it sleeps after an empty fetch, spaces fetches
that bring records by the minimum interval, wraps once, and turns a
cancellation during its sleep into aiokafka's own answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from framework.runtime.fetch_pacing import pace_empty_fetches


class StandInFetcher:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers

    async def _proc_fetch_request(self, assignment: Any, node_id: Any, request: Any) -> bool:
        return self.answers.pop(0)


class StandInConsumer:
    def __init__(self, answers: list[bool]) -> None:
        self._fetcher = StandInFetcher(answers)


async def test_an_empty_fetch_is_followed_by_a_pause() -> None:
    consumer = StandInConsumer([True, False])
    assert pace_empty_fetches(consumer, 0.2)
    assert pace_empty_fetches(consumer, 0.2)  # already paced: not wrapped twice
    step = consumer._fetcher._proc_fetch_request
    started = time.perf_counter()
    assert await step(None, 0, None) is True
    assert time.perf_counter() - started < 0.1
    assert await step(None, 0, None) is False
    assert time.perf_counter() - started >= 0.2


async def test_a_fetch_with_records_waits_out_the_minimum_interval() -> None:
    class SlowFetcher(StandInFetcher):
        async def _proc_fetch_request(self, assignment: Any, node_id: Any, request: Any) -> bool:
            await asyncio.sleep(0.15)
            return self.answers.pop(0)

    consumer = StandInConsumer([])
    consumer._fetcher = SlowFetcher([True, True])
    assert pace_empty_fetches(consumer, 0.0, min_interval=0.1)
    step = consumer._fetcher._proc_fetch_request
    started = time.perf_counter()
    assert await step(None, 0, None) is True  # took longer than the interval: no pause
    assert time.perf_counter() - started < 0.25
    quick = StandInConsumer([True])
    pace_empty_fetches(quick, 0.0, min_interval=0.2)
    started = time.perf_counter()
    assert await quick._fetcher._proc_fetch_request(None, 0, None) is True
    assert time.perf_counter() - started >= 0.2  # answered at once: waits out the interval


async def test_cancelled_while_pausing_returns_like_aiokafka() -> None:
    consumer = StandInConsumer([False])
    pace_empty_fetches(consumer, 5.0)
    task = asyncio.ensure_future(consumer._fetcher._proc_fetch_request(None, 0, None))
    await asyncio.sleep(0.05)
    task.cancel()
    assert await task is False


def test_nothing_to_wrap_or_turned_off() -> None:
    assert not pace_empty_fetches(object(), 0.02)
    consumer = StandInConsumer([])
    original = consumer._fetcher._proc_fetch_request
    assert not pace_empty_fetches(consumer, 0)
    assert not pace_empty_fetches(consumer, 0, min_interval=0)
    assert consumer._fetcher._proc_fetch_request == original
