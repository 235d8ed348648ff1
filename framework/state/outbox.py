"""``ChangelogOutbox``: join-state keys changed locally and not yet on the changelog, per partition.

Whoever changes a key of partition ``p`` calls ``touch(p, keys)``, then
``await flush(p)``: it returns once the broker has the current value of
every key touched before the call. One send runs per partition at a time;
keys touched while it runs go with the next one, so concurrent callers (a
micro-batch, per-key attempts, re-mappings) share sends instead of queueing
one each. A failed send leaves its keys touched: the next flush of the
partition sends them again. After a send the local copy's mark records the
changelog offset it matches (``JoinProcessor`` restores a partition whose
mark is not the changelog's end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from framework.state.kv import KV

__all__ = ["Changelog", "ChangelogOutbox", "MARK"]

#: prefix of the key holding a partition's mark (the changelog offset the local copy matches)
MARK = "M\x1f"


class Changelog(Protocol):
    """Where the join state's changes go, per partition, and where they are restored from."""

    async def send(self, partition: int, records: Sequence[tuple[str, str | None]]) -> int:
        """Send records; returns the offset after the last one, once the broker has them all."""

    async def end(self, partition: int) -> int:
        """The partition's end offset."""

    async def read(self, partition: int) -> list[tuple[str, str | None]]:
        """Every record of the partition, oldest first."""


class ChangelogOutbox:
    """See the module docstring. ``owns(p)`` False: nothing of ``p`` is sent (it moved away)."""

    def __init__(self, kv: KV, changelog: Changelog | None, owns: Callable[[int], bool]) -> None:
        self.kv = kv
        self.changelog = changelog
        self.owns = owns
        self.sends = 0
        self._touched: dict[int, dict[str, int]] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._clock = 0

    def touch(self, p: int, keys: Iterable[str]) -> None:
        """``keys`` of partition ``p`` changed locally."""
        if self.changelog is None:
            return
        touched = self._touched.setdefault(p, {})
        for key in keys:
            self._clock += 1
            touched[key] = self._clock

    def pending(self, p: int) -> int:
        """Keys of ``p`` not yet on the changelog."""
        return len(self._touched.get(p, ()))

    async def flush(self, p: int) -> None:
        """Send every touched key of ``p`` (its current value) unless ``p`` is not owned."""
        changelog = self.changelog
        if changelog is None:
            return
        lock = self._locks.setdefault(p, asyncio.Lock())
        async with lock:
            touched = self._touched.get(p)
            if not touched or not self.owns(p):
                return
            sent = dict(touched)
            records = [(k, self.kv.get(k)) for k in sent]
            after = await changelog.send(p, records)
            self.sends += 1
            for k, stamp in sent.items():
                if touched.get(k) == stamp:  # not touched again meanwhile
                    del touched[k]
            if self._touched.get(p) is touched:  # not moved away nor restored meanwhile
                self.kv.put(f"{MARK}{p}", str(after))

    def mark(self, p: int) -> int | None:
        """The changelog offset the local copy of ``p`` matches (None: unknown)."""
        text = self.kv.get(f"{MARK}{p}")
        return None if text is None else int(text)

    def restored(self, p: int, end: int) -> None:
        """The local copy of ``p`` was just read from the changelog up to ``end``."""
        self._touched.pop(p, None)
        self.kv.put(f"{MARK}{p}", str(end))

    def left(self, p: int) -> None:
        """``p`` moved away. Changes never sent make the local copy differ from the changelog:
        its mark goes, so ``p`` is restored if it comes back."""
        if self._touched.pop(p, None):
            self.kv.delete(f"{MARK}{p}")
