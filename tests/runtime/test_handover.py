"""The worker consumer's hand-over of fetched messages (``framework.runtime.handover``).

The consumer is the real one a worker builds (``create_faust_app``), not started: each test
calls its ``wait_first`` as Faust's fetch loop does, with the conductor's ``on_message``
coroutine and the consumer's ``suspend_flow.wait()``. Every worker of the integration tests
runs the same code against noida-db.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mode.services import WaitResults

from framework.runtime.handover import HandoverConsumer, _round_robin, route, routed
from framework.runtime.intake import Intake
from framework.settings import Settings
from framework.worker.faust_app import ConvergeFaustApp, create_faust_app


@dataclass(frozen=True)
class Msg:
    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConvergeFaustApp]:
    monkeypatch.setenv("CONVERGE_DATA_DIR", str(tmp_path))
    yield create_faust_app(Settings.resolve("handover-test"))


class Conductor:
    """Stands in for Faust's conductor: records what reached it (``on_message`` is its name there)."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.got: list[Msg] = []
        self.gate = gate

    async def on_message(self, message: Msg) -> str:
        if self.gate is not None:
            await self.gate.wait()
        self.got.append(message)
        return "delivered"


def fetched(
    consumer: HandoverConsumer, conductor: Conductor, message: Msg
) -> Coroutine[Any, Any, WaitResults]:
    """The fetch loop's hand-over of ``message``, as Faust's ``Consumer._drain_messages`` calls it."""
    return consumer.wait_first(conductor.on_message(message), consumer.suspend_flow.wait())


def consumer_of(app: ConvergeFaustApp) -> HandoverConsumer:
    consumer = app.consumer
    assert isinstance(consumer, HandoverConsumer)
    return consumer


async def test_a_routed_message_goes_to_the_intake_and_never_to_the_conductor(app: ConvergeFaustApp) -> None:
    consumer, conductor, intake = consumer_of(app), Conductor(), Intake(10)
    route(app, "orders", intake)
    result = await fetched(consumer, conductor, Msg("orders", 1, 7))
    assert not result.stopped
    assert conductor.got == []
    assert await intake.take(10, 0) == [Msg("orders", 1, 7)]
    assert app.monitor.tp_read_offsets[("orders", 1)] == 7


async def test_another_topic_is_delivered_by_the_conductor(app: ConvergeFaustApp) -> None:
    consumer, conductor = consumer_of(app), Conductor()
    route(app, "orders", Intake(10))
    result = await fetched(consumer, conductor, Msg("users", 0, 3))
    assert result.results == ["delivered"] and not result.stopped
    assert conductor.got == [Msg("users", 0, 3)]


async def test_a_blocked_delivery_is_waited_for(app: ConvergeFaustApp) -> None:
    consumer, gate = consumer_of(app), asyncio.Event()
    conductor = Conductor(gate)
    waiting = asyncio.ensure_future(fetched(consumer, conductor, Msg("users", 0, 1)))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    gate.set()
    result = await asyncio.wait_for(waiting, 1)
    assert result.results == ["delivered"] and conductor.got == [Msg("users", 0, 1)]


async def test_a_blocked_delivery_is_abandoned_when_the_flow_is_suspended(app: ConvergeFaustApp) -> None:
    consumer, gate = consumer_of(app), asyncio.Event()
    conductor = Conductor(gate)
    waiting = asyncio.ensure_future(fetched(consumer, conductor, Msg("users", 0, 1)))
    await asyncio.sleep(0.05)
    consumer.stop_flow()
    result = await asyncio.wait_for(waiting, 1)
    assert result.stopped
    gate.set()
    await asyncio.sleep(0.05)
    assert conductor.got == []  # cancelled: never delivered
    assert not consumer.suspend_flow._waiters  # nothing left behind


async def waiting_for_room(
    app: ConvergeFaustApp,
) -> tuple[HandoverConsumer, Conductor, Intake, asyncio.Future[Any]]:
    """A routed intake of one message, full, and the hand-over of a second one waiting for room."""
    consumer, conductor, intake = consumer_of(app), Conductor(), Intake(1)
    route(app, "orders", intake)
    await fetched(consumer, conductor, Msg("orders", 0, 0))
    waiting = asyncio.ensure_future(fetched(consumer, conductor, Msg("orders", 0, 1)))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    return consumer, conductor, intake, waiting


async def test_a_full_intake_holds_back_the_fetch_loop_until_it_has_room(app: ConvergeFaustApp) -> None:
    _, _, intake, waiting = await waiting_for_room(app)
    assert await intake.take(10, 0) == [Msg("orders", 0, 0)]
    assert not (await asyncio.wait_for(waiting, 1)).stopped
    assert await intake.take(10, 0) == [Msg("orders", 0, 1)]


async def test_a_message_waiting_for_room_is_left_when_the_flow_stops(app: ConvergeFaustApp) -> None:
    consumer, conductor, intake, waiting = await waiting_for_room(app)
    consumer.stop_flow()
    assert (await asyncio.wait_for(waiting, 1)).stopped
    assert await intake.take(10, 0) == [Msg("orders", 0, 0)]  # offset 1 left: fetched again later
    assert conductor.got == []


async def test_other_waits_are_mode_s_own(app: ConvergeFaustApp) -> None:
    consumer = consumer_of(app)
    result = await consumer.wait_first(asyncio.sleep(0, "slept"), timeout=1)
    assert result.results == ["slept"]


async def test_a_topic_two_runtimes_consume_goes_through_the_conductor(app: ConvergeFaustApp) -> None:
    consumer, conductor, first, second = consumer_of(app), Conductor(), Intake(10), Intake(10)
    route(app, "orders", first)
    assert routed(app, "orders", first)
    route(app, "orders", second)
    assert not routed(app, "orders", first) and not routed(app, "orders", second)
    await fetched(consumer, conductor, Msg("orders", 0, 0))
    assert conductor.got == [Msg("orders", 0, 0)] and len(first) == len(second) == 0


async def test_a_routed_message_fetched_while_the_flow_is_suspended_is_left(app: ConvergeFaustApp) -> None:
    consumer, conductor, intake = consumer_of(app), Conductor(), Intake(10)
    route(app, "orders", intake)
    consumer.stop_flow()
    assert (await fetched(consumer, conductor, Msg("orders", 0, 5))).stopped
    assert len(intake) == 0 and conductor.got == []  # neither handed over nor sent to a stream
    consumer.resume_flow()
    assert not (await fetched(consumer, conductor, Msg("orders", 0, 5))).stopped
    assert len(intake) == 1


def test_a_fetch_is_taken_round_robin_each_partition_in_order() -> None:
    """Records of several partitions alternate (none waits behind another's whole fetch) and
    keep each partition's order; one partition's come as they are."""
    records = {"a": [1, 2, 3], "b": [10], "c": [20, 21]}
    assert list(_round_robin(records)) == [("a", 1), ("b", 10), ("c", 20), ("a", 2), ("c", 21), ("a", 3)]
    assert list(_round_robin({"a": [1, 2]})) == [("a", 1), ("a", 2)]
    assert list(_round_robin({})) == []
