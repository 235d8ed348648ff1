"""Exact-duplicate skipping for an agent with lookups: ``RuntimeConfig(dedupe=...)`` on joins.

``DedupedJoin`` wraps a ``JoinProcessor`` with the runtime's ``DuplicateFilter``: an event
whose id and exact bytes the filter knows as done is skipped on both paths; an event is
recorded once its attempt succeeded, i.e. once its writes (or its wait for an entry) and
its join record are durable. Skipping it is then what mapping it again would do: the join
book already holds it, as a reader re-mapped when an entry changes or as a pending event
mapped when its entry arrives. An event past ``JoinConfig.max_readers_per_key`` is not a
remembered reader: a skipped duplicate of it is not mapped again with a newer entry either.
Everything else (``book``, ``remap``, ``status``...) is the wrapped processor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.errors import MessageError
from framework.runtime.processor import parse_work
from framework.runtime.work import Work
from framework.state.processor import JoinProcessor

__all__ = ["DedupedJoin"]


class DedupedJoin:
    """A ``JoinProcessor`` that skips events the ``dedupe`` filter knows as done."""

    def __init__(self, processor: JoinProcessor, dedupe: DuplicateFilter) -> None:
        self.processor = processor
        self.dedupe = dedupe
        self.name = processor.name
        self.batchable = processor.batchable

    def __getattr__(self, name: str) -> Any:
        return getattr(self.processor, name)

    def _done_before(self, work: Work) -> bool:
        return work.event is not None and self.dedupe.skips(work, work.event)

    def _remember(self, done: Sequence[Work]) -> None:
        self.dedupe.remember((w, w.event) for w in done if w.event is not None)

    def prepare(self, work: Work) -> None:
        self.processor.prepare(work)

    async def __call__(self, work: Work) -> None:
        if work.event is None:
            work.event = parse_work(work)
        if self._done_before(work):
            return
        await self.processor(work)
        self._remember([work])

    async def map_batch(self, works: Sequence[Work]) -> tuple[list[Any], list[tuple[Work, MessageError]]]:
        """The wrapped ``map_batch`` of the works not done before; items ``(work, None)`` for the others."""
        fresh: list[Work] = []
        skipped: list[tuple[Work, None]] = []
        for w in works:
            if self._done_before(w):
                skipped.append((w, None))
            else:
                fresh.append(w)
        items, bad = await self.processor.map_batch(fresh) if fresh else ([], [])
        return [*items, *skipped], bad

    async def write_batch(self, items: Sequence[Any]) -> None:
        mapped = [(w, plan) for w, plan in items if plan is not None]
        if mapped:
            await self.processor.write_batch(mapped)
            self._remember([w for w, _ in mapped])
