"""An entry whose write ends late still reaches every consumer (issue 22, case 10).

Real SQLite store and checkpoint store; ``GatedStore`` (a test double around the real store,
since no store can be told to be slow) holds an ``apply`` until the test lets it land, so a
reader can read and commit while a writer's write is in flight. Both writers that stamp
entries: the stream's ``NotificationSink`` and the batch jobs' ``write_notifications``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from examples.support_desk.app import app as support_desk
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.mutations import Mutation, Upsert
from framework.notifications import NotificationConfig, NotificationReader
from framework.notifications.sink import NotificationSink, write_notifications
from framework.notifications.stamping import write_stamped
from framework.testing import make_event
from stores.sqlite import SqliteStore
from tests.notifications.conftest import Clock
from tests.notifications.test_reader import keyset, write
from tests.notifications.test_sink import TICKETS

SETTLE = 12.0
CONFIG = NotificationConfig(late_after=4.0)


class GatedStore:
    """The real store; while ``held``, each ``apply`` waits in ``gates`` until the test sets its gate."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.held = True
        self.gates: list[asyncio.Event] = []
        self.applied = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        if self.held:
            gate = asyncio.Event()
            self.gates.append(gate)
            await gate.wait()
        await self.inner.apply(mutations)
        self.applied += 1


async def _late_write(
    store: SqliteStore, clock: Clock, tmp_path: Path, start: Callable[[GatedStore], Awaitable[object]]
) -> tuple[list[Any], list[Any], GatedStore]:
    """Start a write through a held store, let another writer record an entry and a consumer read
    and commit past both stamps, then land the write; (first read, second read, store)."""
    gated = GatedStore(store)
    task = asyncio.create_task(start(gated))
    while not gated.gates:
        await asyncio.sleep(0)
    clock.now += 1
    await write(store, clock, "other", [("o2", "x")])
    clock.now += SETTLE + 1
    cps = SqliteCheckpointStore(tmp_path / "consumer.db")
    try:
        reader = NotificationReader(store, cps, "c", settle=SETTLE, clock=clock)
        first = await reader.read()
        await reader.commit(first)
        gated.held = False
        gated.gates[0].set()  # the write lands SETTLE + 2 s after its stamp
        await task
        clock.now += SETTLE + 1
        second = await reader.read()
        await reader.commit(second)
        assert await reader.read() == []
    finally:
        cps.close_sync()
    return first, second, gated


async def test_a_stream_batch_written_slower_than_settle_is_announced_again(
    store: SqliteStore, clock: Clock, tmp_path: Path
) -> None:
    await store.ensure_table(TICKETS)
    event = make_event("item.set", {"item": "slow"}, key="slow")
    data = [Upsert("tickets", {"org_id": "o1", "id": "slow"}, {"subject": "s"}, 1)]

    def start(gated: GatedStore) -> Awaitable[None]:
        sink = NotificationSink(gated, "app", CONFIG, prefix="agent", clock=clock)  # type: ignore[arg-type]
        return sink.write_batch([(event, data)])

    first, second, gated = await _late_write(store, clock, tmp_path, start)
    assert [e.batch_id for e in first] == ["other"]
    assert keyset(second) == {("o1", "slow")}  # missed before the fix
    assert gated.applied == 2  # the batch with its entries, then the entries again
    assert await store.read_row("tickets", {"org_id": "o1", "id": "slow"}) is not None


async def test_a_batch_jobs_entries_written_slower_than_settle_are_written_again(
    store: SqliteStore, clock: Clock, tmp_path: Path
) -> None:
    """The support desk app's own config (``late_after`` 10 s): the write lands SETTLE + 2 s late."""
    assert support_desk.notifications is not None and support_desk.notifications.late_after < SETTLE + 2
    await store.ensure_table(TICKETS)
    data = [Upsert("tickets", {"org_id": "o1", "id": "job"}, {"subject": "s"}, 1)]
    await store.apply(data)

    def start(gated: GatedStore) -> Awaitable[int]:
        return write_notifications(gated, support_desk, "job/1", data, clock)  # type: ignore[arg-type]

    first, second, _ = await _late_write(store, clock, tmp_path, start)
    assert [e.batch_id for e in first] == ["other"]
    assert keyset(second) == {("o1", "job")}  # missed before the fix


async def test_a_write_in_time_is_written_once() -> None:
    applied: list[list[Mutation]] = []
    times = iter([100.0, 103.9])

    async def apply(ms: Sequence[Mutation]) -> None:
        applied.append(list(ms))

    def notes(at: int) -> list[Mutation]:
        return [Upsert("n", {"at": at}, {"v": 1}, at)]

    data = [Upsert("t", {"id": 1}, {"v": 1}, 1)]
    assert await write_stamped(apply, notes, lambda: next(times), 4.0, data) == 100_000_000
    assert applied == [[*data, *notes(100_000_000)]]


def test_late_after_must_be_positive() -> None:
    for bad in (0, -1.0, float("nan"), float("inf"), True, "5"):
        with pytest.raises(ValueError, match="late_after"):
            NotificationConfig(late_after=bad)  # type: ignore[arg-type]
