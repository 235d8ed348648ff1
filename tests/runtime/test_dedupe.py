"""Exact-duplicate skipping: the filter on a real rocksdict store, and the processor using it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from framework.core.events import Event
from framework.core.mutations import Mutation
from framework.runtime.dedupe import DedupeConfig, DuplicateFilter, digest
from framework.runtime.processor import AgentProcessor
from framework.runtime.sinks import Written
from framework.runtime.work import Work
from framework.testing import make_event
from tests.testing.apps import ItemsAgent


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_only_the_very_same_event_is_seen(tmp_path: Path) -> None:
    f = DuplicateFilter(tmp_path / "d")
    f.record([("p0", "e1", digest(b"v1"))])
    assert f.seen("p0", "e1", digest(b"v1"))
    assert not f.seen("p0", "e1", digest(b"v1 changed"))  # same id, other bytes: not a duplicate
    assert not f.seen("p1", "e1", digest(b"v1"))  # another partition
    assert not f.seen("p0", "e2", digest(b"v1"))
    f.close()
    again = DuplicateFilter(tmp_path / "d")  # it survives a restart
    assert again.seen("p0", "e1", digest(b"v1"))
    again.close()


def test_bounded_per_partition_and_by_retention(tmp_path: Path) -> None:
    clock = Clock()
    f = DuplicateFilter(tmp_path / "d", DedupeConfig(max_ids=3, retention_s=60), clock=clock)
    f.record([("p0", f"e{i}", digest(b"x")) for i in range(5)])
    assert [f.seen("p0", f"e{i}", digest(b"x")) for i in range(5)] == [False, False, True, True, True]
    clock.t += 61
    assert not f.seen("p0", "e4", digest(b"x"))  # past the retention
    f.record([("p0", "e9", digest(b"x"))])  # prunes the expired ones from disk
    f.close()
    reopened = DuplicateFilter(tmp_path / "d", DedupeConfig(max_ids=3, retention_s=60), clock=clock)
    assert [reopened.seen("p0", f"e{i}", digest(b"x")) for i in (2, 3, 4, 9)] == [False] * 3 + [True]
    reopened.close()
    with pytest.raises(ValueError):
        DedupeConfig(max_ids=0)


class CountingSink:
    name = "wide_column"

    def __init__(self) -> None:
        self.events: list[str] = []

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        self.events.append(event.event_id)

    async def write_batch(self, batch: Sequence[Written]) -> None:
        self.events.extend(e.event_id for e, _ in batch)


def test_the_processor_skips_applied_events_and_applies_the_rest(tmp_path: Path) -> None:
    sink, f = CountingSink(), DuplicateFilter(tmp_path / "d")
    processor = AgentProcessor(ItemsAgent(), [sink], dedupe=f)
    e1 = make_event("item.set", {"item": "a", "name": "x"}, key="a", version=1)
    e2 = make_event("item.set", {"item": "a", "name": "y"}, key="a", version=2)
    e3 = make_event("item.set", {"item": "a", "name": "z"}, key="a", version=3)

    def works(*events: Event) -> list[Work]:
        out = [Work("p0", i, b"a", e.to_json()) for i, e in enumerate(events)]
        for w in out:
            processor.prepare(w)
        return out

    async def main() -> None:
        items, bad = processor.map_batch(works(e1, e2))
        await processor.write_batch(items)
        items, _ = processor.map_batch(works(e1, e2))  # the same two delivered again
        assert [written for _, written in items] == [None, None] and not bad
        await processor.write_batch(items)
        await processor(works(e1)[0])  # and through the per-key path
        await processor(works(e3)[0])

    asyncio.run(main())
    assert sink.events == [e1.event_id, e2.event_id, e3.event_id]
    assert f.skipped == 3
    f.close()
