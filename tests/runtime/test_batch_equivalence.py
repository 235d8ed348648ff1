"""The batch path ends where the per-event path ends, whatever fails along the way.

A history of the kit's ``shop`` app (upserts, row deletes, a state log, TTL
cells, a write the store rejects, a malformed message) is delivered shuffled
with duplicates, cut into micro-batches and run by the worker's own pieces:
``run_batch`` (one batch after another) or ``Batches`` (the mapper's next batch
mapped and partly written while the previous one is written) and the
``KeyedScheduler`` over the ``AgentProcessor`` and the ``ProjectionProcessor``,
on an in-memory SQLite store and the kit's ``MemoryIndex``. The store sink fails
batch writes transiently as drawn, some after the write landed (a timeout whose
write went through), or lands them late; single-event writes fail too. The rows,
documents and parked messages must equal one in-order pass of the per-event path
(``framework.testing.Driver``), with or without exact-duplicate skipping (a real
rocksdict store in a temp dir).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.core.events import parse_event
from framework.runtime.backoff import BackoffConfig
from framework.runtime.batch import Batches
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.errors import MessageError
from framework.runtime.processor import AgentProcessor, Processor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.sinks import WideColumnSink, Written
from framework.runtime.work import Work
from framework.testing import Driver, Timeline, deliveries, snapshot
from framework.testing.driver import Parked
from stores.errors import TransientStoreError
from tests.testing.apps import shop

APP = shop()
CONFIG = SchedulerConfig(
    backoff=BackoffConfig(base_delay=0.0005, max_delay=0.002, down_base_delay=0.0005, down_max_delay=0.002,
                          park_after=10_000),
)  # fmt: skip
MALFORMED = b'{"event_id": "half'


class FlakyStore(WideColumnSink):
    """The store sink, failing as ``plan`` says: ``"fail"`` before writing, ``"late"`` after;
    ``"slow"`` writes after a pause, so that a later batch's write can land first."""

    def __init__(self, store: object, plan: Sequence[str]) -> None:
        super().__init__(store)  # type: ignore[arg-type]
        self.plan = itertools.chain(plan, itertools.repeat("ok"))

    async def _step(self, write: object) -> None:
        step = next(self.plan)
        if step == "slow":
            await asyncio.sleep(0.002)
        if step == "fail":
            write.close()  # type: ignore[attr-defined]
            raise TransientStoreError("injected: store unavailable")
        await write  # type: ignore[misc]
        if step == "late":
            raise TransientStoreError("injected: timed out after the write landed")

    async def write(self, event: Event, mutations: Sequence[object]) -> None:
        await self._step(super().write(event, mutations))  # type: ignore[arg-type]

    async def write_batch(self, batch: Sequence[Written]) -> None:
        await self._step(super().write_batch(batch))


async def _run(processor: Processor, messages: list[tuple[bytes | None, bytes]], size: int,
               parked: list[Parked]) -> None:  # fmt: skip
    """Every message through ``Batches`` in micro-batches of ``size``, as the worker runs them."""

    async def park(work: Work, exc: BaseException) -> None:
        cause = exc.cause if isinstance(exc, MessageError) else exc
        stage = exc.stage if isinstance(exc, MessageError) else "sink"
        event = work.event if work.event is not None else work.value
        parked.append(Parked(event, stage, cause))

    sched = KeyedScheduler(processor, park, config=CONFIG)
    batches = Batches(sched, processor, park)
    offsets = itertools.count()
    for i in range(0, len(messages), size):
        works = [Work(("t", 0), next(offsets), k, v) for k, v in messages[i : i + size]]
        for w in works:
            processor.prepare(w)
        await batches.run(works)
    await batches.join()
    assert await sched.drain(30)
    await sched.close()


def _batch_path(
    history: Sequence[Event | bytes],
    size: int,
    plan: Sequence[str],
    dedupe: DuplicateFilter | None = None,
    ahead: bool = False,
) -> Driver:
    """A driver's store and index, filled by the batch path instead of its own per-event path."""
    driver = Driver(APP)
    (agent,), (projection,) = APP.agents, APP.projections
    changes: list[tuple[bytes, bytes]] = []

    async def publish(topic: str, records: Sequence[ChangeRecord]) -> None:
        changes.extend((key, value) for _, key, value in records)

    topic = APP.change_topic(projection)
    feed = ChangeFeedSink(publish, {topic: projection}, {topic: 3})
    sinks = [FlakyStore(driver.store, plan), feed]
    mapper = AgentProcessor(agent, sinks, 5.0, (projection,), dedupe, map_ahead=ahead)
    projector = ProjectionProcessor(projection, driver.store, driver.index)
    raw = [(None, m) if isinstance(m, bytes) else (m.ordering_key.encode(), m.to_json()) for m in history]
    driver.run(_run(mapper, raw, size, driver.parked))
    driver.run(_run(projector, changes, size, driver.parked))
    return driver


events = st.lists(
    st.tuples(st.sampled_from("abc"), st.sampled_from(["set", "deleted", "status", "flash", "bogus"])),
    min_size=1,
    max_size=14,
)


def _timeline(specs: list[tuple[str, str]]) -> list[Event | bytes]:
    t = Timeline()
    for n, (item, kind) in enumerate(specs):
        payload: dict[str, object] = {"item": item}
        if kind == "set":
            payload.update(name=f"{item}{n}", price=n)
        elif kind == "status":
            payload.update(state=["listed", "reserved", "sold"][n % 3], by=f"u{n % 2}")
        elif kind == "flash":
            payload.update(text=f"deal {n}")
        t.add(f"item.{kind}", payload, key=item)
    return [*t, MALFORMED]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), specs=events)
def test_batch_path_equals_the_per_event_path_under_injected_failures(
    data: st.DataObject, specs: list[tuple[str, str]]
) -> None:
    history = _timeline(specs)
    order = data.draw(deliveries(history), label="delivery")
    size = data.draw(st.integers(1, 8), label="batch size")
    steps = st.sampled_from(["ok", "fail", "late", "slow"])
    plan = data.draw(st.lists(steps, max_size=8), label="store failures")
    skip_duplicates = data.draw(st.booleans(), label="skip exact duplicates")
    ahead = data.draw(st.booleans(), label="map and write the next batch ahead")
    with Driver(APP) as per_event:
        per_event.send(history)
        expected = snapshot(per_event)
    with tempfile.TemporaryDirectory() as tmp:
        dedupe = DuplicateFilter(Path(tmp)) if skip_duplicates else None
        batched = _batch_path(order, size, plan, dedupe, ahead)
        try:
            got = snapshot(batched)
        finally:
            batched.close()
            if dedupe is not None:
                dedupe.close()
    assert got.tables == expected.tables
    assert got.documents == expected.documents
    assert {p[:3] for p in got.parked} == {p[:3] for p in expected.parked}


def test_a_failed_batch_is_retried_key_by_key_and_parks_only_the_bad_event() -> None:
    """One batch holds a write the store rejects among good ones: the batch fails, the per-key path
    writes the good ones and parks the bad one alone."""
    t = Timeline()
    t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    t.add("item.bogus", {"item": "b"}, key="b")
    t.add("item.set", {"item": "c", "name": "C", "price": 3}, key="c")
    driver = _batch_path(list(t), size=10, plan=[])
    try:
        assert sorted(r.key["item_id"] for r in driver.rows("items")) == ["a", "c"]
        assert [(p.stage, type(p.error).__name__) for p in driver.parked] == [("sink", "SchemaError")]
        assert parse_event(t[1].to_json()).event_id == driver.parked[0].event.event_id  # type: ignore[union-attr]
    finally:
        driver.close()
