"""``RuntimeConfig(dedupe=...)`` on an agent with lookups (issue 22, case 4): exact duplicates are
skipped on both paths, a skipped event still follows its entry's changes, and the worker wires
the filter in front of the join processor (before: silently dropped)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

from examples.support_desk.agents import MailAgent
from examples.support_desk.app import app as support_desk
from examples.support_desk.payloads import TOPIC_TICKETS
from framework import App, Event, RuntimeConfig, Upsert
from framework.core.mutations import Mutation
from framework.local_stack import StackInfo
from framework.runtime.dedupe import DedupeConfig, DuplicateFilter
from framework.runtime.sinks import Written
from framework.runtime.work import Work
from framework.settings import Settings
from framework.state.dedupe import DedupedJoin
from framework.state.entries import EntryTables
from framework.state.join import JoinBook
from framework.state.kv import MemoryKV
from framework.state.processor import JoinProcessor
from framework.worker.wiring import build_worker
from tests.examples.support_desk.builders import CREATED, REF, event
from tests.examples.support_desk.test_mail import OTHER, reply
from tests.state.join_app import ChildAgent, ParentAgent, child, join_app, parent_set


class RecordingSink:
    """Records what reaches the store (a fake: the test counts sink calls, not rows)."""

    name = "wide_column"

    def __init__(self) -> None:
        self.written: list[tuple[str, tuple[Mutation, ...]]] = []

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        self.written.append((event.event_id, tuple(mutations)))

    async def write_batch(self, batch: Sequence[Written]) -> None:
        self.written.extend((e.event_id, tuple(m)) for e, m in batch)


def _rig(tmp_path: Path) -> tuple[DedupedJoin, RecordingSink, EntryTables, DuplicateFilter]:
    app = join_app()
    entries = EntryTables(app.lookups)
    sink = RecordingSink()
    book = JoinBook(ChildAgent(), MemoryKV(), entries.get, (), app.joins)
    dedupe = DuplicateFilter(tmp_path / "dedupe")
    return DedupedJoin(JoinProcessor(ChildAgent(), [sink], book), dedupe), sink, entries, dedupe


def _works(processor: DedupedJoin, *events: Event | bytes) -> list[Work]:
    out = []
    for i, e in enumerate(events):
        raw, key = (e, b"k") if isinstance(e, bytes) else (e.to_json(), e.ordering_key.encode())
        work = Work(("t.children", 0), i, key, raw)
        processor.prepare(work)
        out.append(work)
    return out


def test_exact_duplicates_are_skipped_on_both_paths_and_follow_entry_changes(tmp_path: Path) -> None:
    processor, sink, entries, dedupe = _rig(tmp_path)
    m1, m2, m3 = child("m1", "c1", "a", 100), child("m2", "c1", "b", 110), child("m3", "c2", "c", 120)
    entries.feed("t.parents", parent_set("c1", "A", "alpha", 50))

    async def main() -> None:
        items, bad = await processor.map_batch(_works(processor, m1, m2, m3))  # m3 waits for c2
        assert bad == []
        await processor.write_batch(items)
        items, bad = await processor.map_batch(_works(processor, m1, m2, m3))  # delivered again
        assert [plan for _, plan in items] == [None, None, None] and bad == []
        await processor.write_batch(items)
        await processor(_works(processor, m1)[0])  # and by the per-key path
        changed = entries.feed("t.parents", parent_set("c1", "B", "beta", 200))
        await processor.remap(changed)  # the skipped duplicates are still readers of c1
        await processor(_works(processor, m3)[0])  # still pending: skipped, mapped when c2 comes
        await processor.remap(entries.feed("t.parents", parent_set("c2", "C", "gamma", 300)))

    asyncio.run(main())
    assert dedupe.skipped == 5
    written = [(eid, m.key["parent"]) for eid, ms in sink.written for m in ms if isinstance(m, Upsert)]
    assert written == [("c-m1", "A"), ("c-m2", "A"), ("c-m1", "B"), ("c-m2", "B"), ("c-m3", "C")]
    dedupe.close()


def test_the_same_id_with_other_bytes_and_a_bad_event_are_not_skipped(tmp_path: Path) -> None:
    processor, sink, entries, dedupe = _rig(tmp_path)
    entries.feed("t.parents", parent_set("c1", "A", "alpha", 50))
    m1 = child("m1", "c1", "a", 100)
    edited = Event(m1.event_id, m1.ordering_key, 150, 150, m1.type, {**m1.payload, "body": "edited"})

    async def main() -> None:
        await processor(_works(processor, m1)[0])
        await processor(_works(processor, edited)[0])  # same id, other bytes: applied
        items, bad = await processor.map_batch(_works(processor, b"{not json", m1))
        assert [(w.offset, e.stage) for w, e in bad] == [(0, "parse")]  # parked, never skipped
        assert [w.offset for w, plan in items if plan is not None] == [1]  # the id was last seen edited

    asyncio.run(main())
    assert [eid for eid, _ in sink.written] == ["c-m1", "c-m1"]
    dedupe.close()


async def test_the_worker_puts_the_filter_in_front_of_the_join_processor(
    stack: StackInfo, tmp_path: Path
) -> None:
    """The worker's wiring on the session's noida-db and a SQLite store: the join agent's runtime
    gets a ``DedupedJoin`` whose filter lives in the agent's dedupe directory; a redelivered
    event is skipped and counted in the status. Before: a bare ``JoinProcessor``."""
    name = f"join-dedupe-{uuid.uuid4().hex[:8]}"
    app = App(name, agents=[ParentAgent(), ChildAgent()], runtime=RuntimeConfig(dedupe=DedupeConfig()))
    env = {
        "CONVERGE_DATA_DIR": str(tmp_path / "data"),
        "CONVERGE_BROKER": f"kafka://{stack.kafka_bootstrap}",
        "CONVERGE_WIDE_STORE": f"sqlite:///{tmp_path / 'wide.db'}",
        "CONVERGE_PARTITIONS": "1",
    }
    worker = build_worker(app, Settings.resolve(name, env=env))
    for hook in worker.starting:
        await hook()
    try:
        runtimes = {r.name: r for r in worker.converge.runtimes}
        processor = runtimes["children"].processor
        assert isinstance(processor, DedupedJoin)
        assert isinstance(runtimes["parents"].processor.dedupe, DuplicateFilter)
        processor.assign([0])
        m1 = child("m1", "c1", "a", 100)
        for work in _works(processor, m1, m1):
            await processor(work)
        assert processor.dedupe.skipped == 1  # what the runtime's status shows as duplicates_skipped
        assert processor.book.pending()  # the first delivery waits for c1, durably
    finally:
        for hook in reversed(worker.stopped):
            await hook()


def test_the_support_desk_mail_agent_skips_a_redelivered_reply_and_still_moves_it(tmp_path: Path) -> None:
    """The support desk's ``MailAgent`` (its lookup fed by the ticket events): a redelivered reply
    is skipped, and a ticket that takes its conversation over still moves it."""
    entries = EntryTables(support_desk.lookups)
    sink = RecordingSink()
    dedupe = DuplicateFilter(tmp_path / "dedupe")
    book = JoinBook(MailAgent(), MemoryKV(), entries.get, (), support_desk.joins)
    processor = DedupedJoin(JoinProcessor(MailAgent(), [sink], book), dedupe)
    entries.feed(TOPIC_TICKETS, event("ticket.created", 100, **CREATED, conversation_id="thread-1"))
    m1 = reply("m1", 300)
    other = {
        "tenant": "acme",
        "source": "zendesk",
        "external_id": OTHER.external_id,
        "conversation_id": "thread-1",
    }

    async def main() -> None:
        for work in _works(processor, m1, m1, m1):
            await processor(work)
        await processor.remap(
            entries.feed(TOPIC_TICKETS, event("ticket.updated", 500, key=OTHER.ordering_key, **other))
        )

    asyncio.run(main())
    assert dedupe.skipped == 2
    tickets = [m.key["ticket_id"] for _, ms in sink.written for m in ms if isinstance(m, Upsert)]
    assert tickets == [REF.ticket_id, OTHER.ticket_id]
    dedupe.close()
