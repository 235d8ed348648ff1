"""A runtime's intake: the messages of its topic that the consumer's fetch loop hands over
directly (``framework.runtime.handover``), taken by the runtime in micro-batches.

Bounded: when it holds ``bound`` messages, ``offer`` refuses and the fetch loop waits on
``room``, which holds back fetching, as a full Faust stream buffer does. Messages of revoked
partitions are dropped (``drop``): never acknowledged, they are delivered again from the
committed offset to the partition's next owner.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, Hashable, Iterable
from typing import Any

__all__ = ["Intake"]


class Intake:
    """Messages of one topic in fetch order, taken in batches of at most ``max_`` within ``within`` s."""

    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"an intake holds at least one message, not {bound}")
        self.bound = bound
        self._items: deque[Any] = deque()
        self._want = 1  # how many messages wake the waiting taker
        self._ready: asyncio.Future[None] | None = None  # the taker waits on it
        self._room: asyncio.Future[None] | None = None  # the fetch loop waits on it

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, message: Any) -> bool:
        """Append ``message``; False (and nothing appended) when the intake is full."""
        items = self._items
        if len(items) >= self.bound:
            return False
        items.append(message)
        ready = self._ready
        if ready is not None and len(items) >= self._want and not ready.done():
            ready.set_result(None)
        return True

    def room(self) -> asyncio.Future[None]:
        """A future done once the intake has room (at once if it has)."""
        room = self._room
        if room is None or room.done():
            room = self._room = asyncio.get_running_loop().create_future()
        if len(self._items) < self.bound:
            room.set_result(None)
        return room

    async def take(self, max_: int, within: float) -> list[Any]:
        """The oldest messages, at most ``max_``: waits for the first, then at most ``within``
        seconds for the batch to fill."""
        while True:
            while not self._items:
                await self._until(1, None)
            if len(self._items) < max_ and within > 0:
                await self._until(max_, within)
            if self._items:  # else a revocation emptied it meanwhile
                break
        items = self._items
        batch = [items.popleft() for _ in range(min(max_, len(items)))]
        self._wake_room()
        return batch

    async def put_all(self, events: AsyncIterable[Any]) -> None:
        """Append the message of each of ``events`` (Faust events), waiting for room when full."""
        async for event in events:
            message = event.message
            while not self.offer(message):
                await self.room()

    def drop(self, tps: Iterable[Hashable]) -> int:
        """Remove the messages of partitions ``tps``; returns how many."""
        gone = set(tps)
        kept = [m for m in self._items if m.tp not in gone]
        dropped = len(self._items) - len(kept)
        if dropped:
            self._items = deque(kept)
            self._wake_room()
        return dropped

    async def _until(self, want: int, timeout: float | None) -> None:
        """Wait until the intake holds ``want`` messages, or ``timeout`` seconds passed."""
        loop = asyncio.get_running_loop()
        self._want, ready = want, loop.create_future()
        self._ready = ready
        timer = None if timeout is None else loop.call_later(timeout, _settle, ready)
        try:
            await ready
        finally:
            self._ready, self._want = None, 1
            if timer is not None:
                timer.cancel()

    def _wake_room(self) -> None:
        room = self._room
        if room is not None and not room.done() and len(self._items) < self.bound:
            room.set_result(None)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
