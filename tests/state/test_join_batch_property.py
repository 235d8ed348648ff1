"""Property: the batch path converges like the per-event path.

The histories of ``test_join_property`` (entries created and changed, events
reading them, any order, duplicates, replays) are cut into micro-batches and
run by ``run_batch`` and the ``KeyedScheduler`` over the ``JoinProcessor``
(in-memory book, SQLite store); the entry events of a chunk are applied
while its batch is in flight, so re-mappings race the batch's writes; the
store fails batch writes transiently as drawn, some after the write landed
(the failing store is a wrapper that injects faults). The rows equal the
mapping applied with the final entries; exactly the events whose entry
never arrived wait; nothing is parked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.runtime.sinks import WideColumnSink, Written
from stores.errors import TransientStoreError
from tests.state.join_rig import Member, msg_rows, open_store
from tests.state.test_join_property import SPACINGS, histories


class FlakyStore(WideColumnSink):
    """The store sink failing batch writes as ``plan`` says: ``fail`` before, ``late`` after."""

    def __init__(self, store: object, plan: Sequence[str]) -> None:
        super().__init__(store)  # type: ignore[arg-type]
        self.plan = itertools.chain(plan, itertools.repeat("ok"))

    async def write(self, event: Any, mutations: Sequence[Any]) -> None:
        """The per-key path's write, failing as ``plan`` says too."""
        step = next(self.plan)
        if step == "fail":
            raise TransientStoreError("injected: store unavailable")
        await super().write(event, mutations)
        if step == "late":
            raise TransientStoreError("injected: timed out after the write landed")

    async def write_batch(self, batch: Sequence[Written]) -> None:
        step = next(self.plan)
        if step == "fail":
            raise TransientStoreError("injected: store unavailable")
        await super().write_batch(batch)
        if step == "late":
            raise TransientStoreError("injected: timed out after the write landed")


async def _run(events: list[Event], size: int, plan: Sequence[str]) -> tuple[dict, set[str], list]:
    store = await open_store()
    m = Member(None, store, None, sinks=[FlakyStore(store, plan)])
    offsets = itertools.count()
    try:
        for i in range(0, len(events), size):
            chunk = events[i : i + size]
            kids = [(0, next(offsets), e) for e in chunk if e.type == "child.posted"]
            batch = asyncio.ensure_future(m.batch(kids))
            await asyncio.sleep(0)  # the batch is planned; entries arrive while it writes
            await m.feed([e for e in chunk if e.type == "parent.set"])
            await batch
        await m.processor.settle()
        pending = {eid for _, eid, *_ in m.book.pending()}
        return await msg_rows(store), pending, m.parked
    finally:
        await m.close()
        await store.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.sampled_from(SPACINGS).flatmap(histories), data=st.data())
def test_the_batch_path_ends_in_the_rows_of_the_final_entries(
    history: tuple[list[Event], dict], data: st.DataObject
) -> None:
    events, oracle = history
    size = data.draw(st.integers(1, 8), label="batch size")
    plan = data.draw(st.lists(st.sampled_from(["ok", "fail", "late"]), max_size=6), label="store failures")
    rows, pending, parked = asyncio.run(_run(events, size, plan))
    assert rows == oracle
    assert parked == []
    mapped = {f"c-{m}" for _, m in oracle}
    assert pending == {e.event_id for e in events if e.type == "child.posted"} - mapped
