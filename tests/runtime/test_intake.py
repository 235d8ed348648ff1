"""The runtime's intake: bounded, batched, and emptied of revoked partitions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from framework.runtime.intake import Intake


@dataclass(frozen=True)
class Msg:
    tp: tuple[str, int]
    offset: int


def msgs(partition: int, offsets: range) -> list[Msg]:
    return [Msg(("t", partition), o) for o in offsets]


async def test_a_full_intake_refuses_until_a_take_makes_room() -> None:
    intake = Intake(3)
    assert all(intake.offer(m) for m in msgs(0, range(3)))
    assert not intake.offer(Msg(("t", 0), 3))
    room = intake.room()
    assert not room.done()
    assert [m.offset for m in await intake.take(2, 0)] == [0, 1]
    assert room.done()
    assert intake.offer(Msg(("t", 0), 3))
    assert [m.offset for m in await intake.take(10, 0)] == [2, 3]


async def test_take_waits_for_the_first_message_then_returns_what_came_within() -> None:
    intake = Intake(100)
    taking = asyncio.ensure_future(intake.take(10, 0.2))
    await asyncio.sleep(0.05)
    assert not taking.done()
    started = time.perf_counter()
    intake.offer(Msg(("t", 0), 0))
    batch = await taking
    assert [m.offset for m in batch] == [0]
    assert time.perf_counter() - started >= 0.15  # waited for more until `within`


async def test_take_returns_as_soon_as_the_batch_is_full() -> None:
    intake = Intake(100)
    taking = asyncio.ensure_future(intake.take(3, 30))
    for m in msgs(1, range(5)):
        intake.offer(m)
    batch = await asyncio.wait_for(taking, 1)
    assert [m.offset for m in batch] == [0, 1, 2]
    assert len(intake) == 2


async def test_drop_removes_revoked_partitions_and_makes_room() -> None:
    intake = Intake(4)
    for m in msgs(0, range(2)) + msgs(1, range(2)):
        intake.offer(m)
    room = intake.room()
    assert intake.drop({("t", 0)}) == 2
    assert room.done()
    assert [(m.tp[1], m.offset) for m in await intake.take(10, 0)] == [(1, 0), (1, 1)]


def test_an_intake_holds_at_least_one_message() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Intake(0)


async def test_a_batch_emptied_by_a_revocation_while_filling_is_not_returned() -> None:
    intake = Intake(10)
    intake.offer(Msg(("t", 0), 0))
    taking = asyncio.ensure_future(intake.take(5, 0.1))
    await asyncio.sleep(0.02)
    intake.drop({("t", 0)})
    await asyncio.sleep(0.15)
    assert not taking.done()  # waits for a message again rather than returning nothing
    intake.offer(Msg(("t", 1), 0))
    assert [m.tp for m in await asyncio.wait_for(taking, 1)] == [("t", 1)]


async def test_put_all_appends_each_event_s_message_and_waits_for_room() -> None:
    @dataclass(frozen=True)
    class Event:
        message: Msg

    async def events() -> AsyncIterator[Event]:
        for m in msgs(0, range(3)):
            yield Event(m)

    intake = Intake(2)
    putting = asyncio.ensure_future(intake.put_all(events()))
    await asyncio.sleep(0.05)
    assert not putting.done() and len(intake) == 2  # the third waits for room
    assert [m.offset for m in await intake.take(10, 0)] == [0, 1]
    await asyncio.wait_for(putting, 1)
    assert [m.offset for m in await intake.take(10, 0)] == [2]
