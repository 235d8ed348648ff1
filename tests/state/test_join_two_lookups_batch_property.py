"""Property (issues 22, 42): the two-lookup histories of ``test_join_two_lookups_property`` (versions 1
us to a day apart) through the worker's join processor: micro-batches by ``run_batch`` and the
``KeyedScheduler`` (batch path, per-key path on a failure; or every event by the per-key path, as
drawn) over a SQLite store, entry events applied and their readers re-mapped while each batch is in
flight, writes failing transiently as drawn (some after the write landed: ``FlakyStore`` of
``test_join_batch_property`` injects them). The cells equal the model's, at the event's version plus
at most one per entry change; exactly the items whose entry never came wait; nothing is parked."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.runtime.batch import run_batch
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.work import Work
from framework.state.entries import EntryTables
from framework.state.join import JoinBook
from framework.state.kv import MemoryKV
from framework.state.processor import JoinProcessor
from stores.sqlite.store import SqliteStore
from tests.state.join_rig import FAST, REMAP_RETRY
from tests.state.test_join_batch_property import FlakyStore
from tests.state.test_join_two_lookups_property import Cells, histories
from tests.state.two_lookups_app import ITEM, THREAD, ItemAgent, app

TOPICS = {"owner.set": "t.owners", "tag.set": "t.tags"}


async def _run(
    events: list[Event], size: int, plan: Sequence[str], per_key: bool = False
) -> tuple[Cells, set[str], list]:
    store = await SqliteStore.open(":memory:")
    for schema in (ITEM, THREAD):
        await store.ensure_table(schema)
    entries = EntryTables(app.lookups)
    agent = ItemAgent()
    parked: list = []

    async def park(work: Work, exc: BaseException) -> None:
        parked.append((work.offset, exc))

    async def park_remap(p: int, event: Event, raw: str, exc: BaseException) -> None:
        parked.append((event.event_id, exc))

    processor = JoinProcessor(agent, [FlakyStore(store, plan)], JoinBook(agent, MemoryKV(), entries.get), 5.0,
                              park=park_remap, retry_delay=REMAP_RETRY)  # fmt: skip
    processor.batchable = not per_key  # per-key: every event by the per-key path, as without batch sinks
    scheduler = KeyedScheduler(processor, park, config=FAST)
    offsets = itertools.count()
    try:
        for i in range(0, len(events), size):
            chunk = events[i : i + size]
            works = []
            for e in chunk:
                if e.type == "item.posted":
                    work = Work(("t.items", 0), next(offsets), e.ordering_key.encode(), e.to_json())
                    work.ack = lambda: None
                    processor.prepare(work)
                    works.append(work)
            batch = asyncio.ensure_future(run_batch(works, scheduler, processor, park))
            await asyncio.sleep(0)  # the batch is planned; entries arrive while it writes
            changed = [c for e in chunk if e.type in TOPICS for c in entries.feed(TOPICS[e.type], e)]
            await processor.remap(changed)
            await processor.settle()
            await batch
            assert await scheduler.drain(60)  # a loaded machine: retries of drawn store failures
        await processor.settle()
        out: Cells = {}
        for schema in (ITEM, THREAD):
            async for r in store.scan(schema.name):
                cells = {c: (x.value, x.writetime) for c, x in r.cells.items()}
                out[(schema.name, tuple(r.key.values()))] = cells  # type: ignore[assignment]
        return out, {eid for _, eid, *_ in processor.book.pending()}, parked
    finally:
        await scheduler.close()
        await processor.close()
        await store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), data=st.data())
def test_the_worker_path_ends_in_the_model_of_two_lookups(
    history: tuple[list[Event], Cells, set[str]], data: st.DataObject
) -> None:
    events, expected, waiting = history
    size = data.draw(st.integers(1, 8), label="batch size")
    plan = data.draw(st.lists(st.sampled_from(["ok", "fail", "late"]), max_size=6), label="store failures")
    per_key = data.draw(st.booleans(), label="per-key path")
    stored, pending, parked = asyncio.run(_run(events, size, plan, per_key))
    assert parked == []
    assert stored == expected
    assert pending == waiting
