"""Ordered acknowledgement: release only the contiguous prefix of finished offsets."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

from framework.core.errors import ConvergeError

__all__ = ["OffsetTracker", "OffsetOrderError"]

T = TypeVar("T")


class OffsetOrderError(ConvergeError, RuntimeError):
    """Offsets were tracked out of order, or an unknown offset was finished."""


class OffsetTracker(Generic[T]):
    """Tracks the offsets of one partition from receipt to acknowledgement.

    ``track`` registers offsets in the order they were received (strictly
    increasing). ``finish`` marks one done and returns the items that may now
    be acknowledged, in offset order: the longest run of finished offsets at
    the head. An offset after an unfinished one is never released, so a commit
    built from the released offsets never passes unfinished work.
    """

    __slots__ = ("_pending", "_items", "_done", "_last")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._items: dict[int, T] = {}
        self._done: set[int] = set()
        self._last: int | None = None

    def track(self, offset: int, item: T) -> None:
        """Register a received offset with the item to release when acknowledged."""
        if self._last is not None and offset <= self._last:
            raise OffsetOrderError(f"offset {offset} tracked after {self._last}")
        self._last = offset
        self._pending.append(offset)
        self._items[offset] = item

    def finish(self, offset: int) -> list[T]:
        """Mark ``offset`` finished; return the items now safe to acknowledge, in order."""
        return self.finish_many([offset])

    def finish_many(self, offsets: list[int]) -> list[T]:
        """``finish`` of each of ``offsets``; the items now safe to acknowledge, in order."""
        items, done = self._items, self._done
        for offset in offsets:
            if offset not in items or offset in done:
                raise OffsetOrderError(f"offset {offset} is not pending")
            done.add(offset)
        released: list[T] = []
        pending = self._pending
        while pending and pending[0] in done:
            head = pending.popleft()
            done.discard(head)
            released.append(items.pop(head))
        return released

    @property
    def last(self) -> int | None:
        """The highest offset tracked so far."""
        return self._last

    @property
    def pending(self) -> int:
        """Offsets received and not yet released (finished or not)."""
        return len(self._pending)

    @property
    def low_watermark(self) -> int | None:
        """The earliest offset not yet released, or None when all are released."""
        return self._pending[0] if self._pending else None
