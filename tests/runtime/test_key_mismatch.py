"""A record whose Kafka key is not its event's ordering key is parked at stage ``key`` (issue 22,
case 9): an empty, missing or non-UTF-8 key, or another entity's. Through the worker's own pieces
(``KeyedScheduler``, ``run_batch``, ``AgentProcessor``, ``ProjectionProcessor``) on the kit's
real SQLite store, both the per-key and the batch path; the good records of the same keys apply."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from framework.core.events import EventError
from framework.runtime.backoff import BackoffConfig
from framework.runtime.batch import run_batch
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.errors import MessageError
from framework.runtime.processor import AgentProcessor, Processor, parse_work
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.sinks import WideColumnSink
from framework.runtime.work import Work
from framework.testing import Driver, make_event
from framework.testing.driver import Parked
from tests.testing.apps import ITEMS, shop

APP = shop()
CONFIG = SchedulerConfig(backoff=BackoffConfig(base_delay=0.0005, max_delay=0.002, park_after=10_000))
BAD_KEYS = {"empty": b"", "missing": None, "not UTF-8": b"\xff\xfea", "another entity": b"b"}


async def _run(processor: Processor, messages: Sequence[tuple[bytes | None, bytes]], size: int,
               parked: list[Parked]) -> None:  # fmt: skip
    async def park(work: Work, exc: BaseException) -> None:
        assert isinstance(exc, MessageError), exc
        parked.append(Parked(work.event if work.event is not None else work.value, exc.stage, exc.cause))

    sched = KeyedScheduler(processor, park, config=CONFIG)
    offsets = itertools.count()
    for i in range(0, len(messages), size):
        works = [Work(("t", 0), next(offsets), k, v) for k, v in messages[i : i + size]]
        for w in works:
            processor.prepare(w)
        await run_batch(works, sched, processor, park)
    assert await sched.drain(30)
    await sched.close()


@pytest.mark.parametrize("size", [1, 4], ids=["per-key", "batch"])
@pytest.mark.parametrize("what", sorted(BAD_KEYS))
def test_a_record_under_the_wrong_kafka_key_is_parked_at_key(what: str, size: int) -> None:
    good = make_event("item.set", {"item": "a", "name": "Lamp", "price": 2}, key="a", version=1)
    stray = make_event("item.set", {"item": "a", "name": "Stray", "price": 9}, key="a", version=5)
    messages = [(b"a", good.to_json()), (BAD_KEYS[what], stray.to_json())]
    with Driver(APP) as driver:
        (agent,), (projection,) = APP.agents, APP.projections
        changes: list[tuple[bytes, bytes]] = []

        async def publish(topic: str, records: Sequence[ChangeRecord]) -> None:
            changes.extend((key, value) for _, key, value in records)

        topic = APP.change_topic(projection)
        sinks = [WideColumnSink(driver.store), ChangeFeedSink(publish, {topic: projection}, {topic: 3})]
        parked: list[Parked] = []
        driver.run(_run(AgentProcessor(agent, sinks, 5.0, (projection,)), messages, size, parked))
        driver.run(_run(ProjectionProcessor(projection, driver.store, driver.index), changes, size, parked))
        # applied without a word before the fix: the row said "Stray"
        assert [(p.stage, type(p.error).__name__) for p in parked] == [("key", "EventError")]
        assert "ordering_key is 'a'" in str(parked[0].error)
        row = driver.row(ITEMS.name, {"item_id": "a"})
        assert row is not None and row.cells["name"].value == "Lamp"
        assert changes, "the change feed announced nothing"
        assert driver.documents("catalog")["a"][1] == 1


def test_the_error_names_the_key_and_the_ordering_key() -> None:
    event = make_event("item.set", {"item": "a", "name": "x"}, key="a")
    assert parse_work(Work("t", 0, b"a", event.to_json())) == event
    messages = {b"": "the Kafka key is empty", None: "no key", b"\xff": "not UTF-8 text", b"b": "'b' differs"}
    for key, text in messages.items():
        with pytest.raises(MessageError) as info:
            parse_work(Work("t", 0, key, event.to_json()))
        error = info.value.cause
        assert info.value.stage == "key"
        assert isinstance(error, EventError) and text in str(error) and "ordering_key is 'a'" in str(error)


def test_a_stray_record_holds_the_lane_of_its_kafka_key() -> None:
    processor = AgentProcessor(APP.agents[0], [])
    stray = Work("t", 0, b"b", make_event("item.set", {"item": "a", "name": "x"}, key="a").to_json())
    processor.prepare(stray)
    assert stray.event is None and stray.relation == "b"
