"""Batches mapped and written ahead keep each key's writes in offset order and ack in order.

``Batches`` maps batch N+1 while batch N is written and writes at once the part of it
whose keys N does not hold. The sink here is a recording batch sink (a stand-in, nothing
is stored: the order in which writes land is what is checked) whose writes land after a
drawn pause, fail before landing or fail after landing, as a test draws. The model is
written here: the offsets acknowledged are exactly 0..n-1 in order, the bad ones parked;
per key, its events are first written in offset order, and the last write of a key is
its latest event (a batch that landed and reported failure is written again event by
event, before anything later of its keys). Every good event must have been written.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.runtime.batch import Batches
from framework.runtime.errors import MessageError
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.work import Work
from stores.errors import TransientStoreError
from tests.runtime.test_batch_equivalence import CONFIG


class RecordingProcessor:
    """A batchable processor that maps ahead: each work becomes its own (key, offset); writes
    follow ``plan`` (``ok``, ``slow``: lands after a pause, ``fail``: fails before landing,
    ``late``: lands, then fails) and are recorded in the order they land; a value ``bad``
    is a message-level failure."""

    name = "recording"
    batchable = True
    map_ahead = True

    def __init__(self, plan: Sequence[str]) -> None:
        self.plan = itertools.chain(plan, itertools.repeat("ok"))
        self.landed: list[tuple[Any, int]] = []
        self.in_flight = 0
        self.overlapped = 0

    def prepare(self, work: Work) -> None:
        work.relation = work.key

    async def _land(self, works: Sequence[Work]) -> None:
        step = next(self.plan)
        self.in_flight += 1
        self.overlapped = max(self.overlapped, self.in_flight)
        try:
            await asyncio.sleep(0.002 if step == "slow" else 0)
            if step == "fail":
                raise TransientStoreError("injected: not written")
            self.landed.extend((w.relation, w.offset) for w in works)
            if step == "late":
                raise TransientStoreError("injected: written, then timed out")
        finally:
            self.in_flight -= 1

    async def __call__(self, work: Work) -> None:
        if work.value == b"bad":
            raise MessageError("map", ValueError("bad"))
        await self._land([work])

    def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        good = [(w, None) for w in works if w.value != b"bad"]
        bad = [(w, MessageError("map", ValueError("bad"))) for w in works if w.value == b"bad"]
        return good, bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        await self._land([w for w, _ in items])


async def _run(messages: list[tuple[str, bool]], sizes: list[int], plan: list[str]) -> RecordingProcessor:
    processor = RecordingProcessor(plan)
    acked: list[int] = []
    parked: list[int] = []

    async def park(work: Work, exc: BaseException) -> None:
        parked.append(work.offset)

    sched = KeyedScheduler(processor, park, config=CONFIG)
    batches = Batches(sched, processor, park)
    assert batches.ahead
    works = []
    for offset, (key, bad) in enumerate(messages):
        work = Work(("t", 0), offset, key, b"bad" if bad else b"ok", ack=lambda o=offset: acked.append(o))
        processor.prepare(work)
        works.append(work)
    cuts = itertools.cycle(sizes)
    i = 0
    while i < len(works):
        size = next(cuts)
        await batches.run(works[i : i + size])
        i += size
    await batches.join()
    assert await sched.drain(30)
    await sched.close()
    assert acked == list(range(len(messages)))  # every message, once, in offset order
    assert sorted(parked) == [o for o, (_, bad) in enumerate(messages) if bad]
    return processor


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(st.sampled_from("abcd"), min_size=2, max_size=40),
    bad=st.sets(st.integers(0, 39), max_size=3),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    plan=st.lists(st.sampled_from(["ok", "ok", "slow", "fail", "late"]), max_size=12),
)
def test_each_keys_writes_land_in_offset_order(
    keys: list[str], bad: set[int], sizes: list[int], plan: list[str]
) -> None:
    messages = [(k, i in bad) for i, k in enumerate(keys)]
    processor = asyncio.run(_run(messages, sizes, plan))
    good = {o for o, (_, b) in enumerate(messages) if not b}
    assert {o for _, o in processor.landed} == good  # every good message was written
    first: dict[Any, list[int]] = {}
    seen: set[int] = set()
    for key, offset in processor.landed:
        if offset not in seen:
            seen.add(offset)
            first.setdefault(key, []).append(offset)
    for key, offsets in first.items():
        assert offsets == sorted(offsets), f"{key}: first written in the order {offsets}"
        last = next(o for k, o in reversed(processor.landed) if k == key)
        assert last == max(offsets), f"{key}: {last} was written last, not {max(offsets)}"


def test_the_next_batch_is_written_while_the_previous_one_is() -> None:
    """Two batches of different keys with a slow first write: both are in flight at once."""
    messages = [("a", False)] * 3 + [("b", False)] * 3
    processor = asyncio.run(_run(messages, [3], ["slow", "ok"]))
    assert processor.overlapped == 2
    assert [o for _, o in processor.landed] == [3, 4, 5, 0, 1, 2]  # b's write landed first


def test_a_key_held_by_a_failed_batch_waits_behind_its_retries() -> None:
    """Batch 1 fails after landing; batch 2 holds the same key: it lands only after batch 1's
    events landed again one by one."""
    messages = [("a", False), ("b", False), ("a", False), ("c", False)]
    processor = asyncio.run(_run(messages, [2], ["late"]))
    a = [o for k, o in processor.landed if k == "a"]
    assert a == sorted(a) and a[-1] == 2 and a.count(0) == 2
