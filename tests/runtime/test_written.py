"""The projector drops a rewrite identical to its last write of a document, and converges anyway.

The index here is the kit's ``MemoryIndex`` (an in-memory stand-in that
answers like Elasticsearch, external versions included), wrapped to fail
bulk requests as a test draws; the store is the real SQLite engine in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.runtime.batch import run_batch
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.errors import MessageError
from framework.runtime.processor import AgentProcessor, Processor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.sinks import WideColumnSink
from framework.runtime.work import Work
from framework.runtime.written import WrittenDocuments
from framework.testing import Driver, Timeline, deliveries, snapshot
from framework.testing.driver import Parked
from framework.testing.index import MemoryIndex
from stores.base import BulkResult, IndexOp
from stores.errors import TransientStoreError
from tests.runtime.test_batch_equivalence import CONFIG, _timeline
from tests.testing.apps import shop

APP = shop()


# -- WrittenDocuments ---------------------------------------------------------------------------


def test_an_identical_write_is_dropped_and_any_difference_is_sent() -> None:
    written = WrittenDocuments()
    first = [IndexOp("a", 5, {"x": 1, "y": [1, 2]}), IndexOp("b", 5, None)]
    send, fps = written.new_writes(first)
    assert send == first and written.skipped == 0
    written.record(fps)
    again = [IndexOp("a", 5, {"y": [1, 2], "x": 1}), IndexOp("b", 5, None)]  # key order does not matter
    assert written.new_writes(again) == ([], []) and written.skipped == 2
    changed = [
        IndexOp("a", 5, {"x": 2, "y": [1, 2]}),  # same version, other content: a late older event
        IndexOp("a", 6, {"x": 1, "y": [1, 2]}),  # other version
        IndexOp("b", 6, None),
        IndexOp("b", 5, {"x": 1}),  # a delete, then a document at the same version
        IndexOp("c", 5, {"x": 1}),  # never written
    ]
    for op in changed:
        assert written.new_writes([op])[0] == [op], op


def test_nothing_is_remembered_before_record_nor_after_forget() -> None:
    written = WrittenDocuments()
    op = IndexOp("a", 1, {"x": 1})
    _, fps = written.new_writes([op])
    assert written.new_writes([op])[0] == [op]  # not recorded: the write may have failed
    written.record(fps)
    assert written.new_writes([op])[0] == []
    written.forget()
    assert len(written) == 0 and written.new_writes([op])[0] == [op]


def test_a_document_that_cannot_be_digested_is_always_sent() -> None:
    written = WrittenDocuments()
    for op in (IndexOp("a", 1, {"when": object()}), IndexOp("b", 1, {"text": "\ud800"})):
        send, fps = written.new_writes([op])
        assert send == [op] and fps == []
        written.record(fps)
        assert written.new_writes([op])[0] == [op]


def test_the_least_recently_written_documents_are_dropped_beyond_capacity() -> None:
    written = WrittenDocuments(capacity=2)
    ops = {d: IndexOp(d, 1, {"d": d}) for d in "abc"}
    for d in "ab":
        written.record(written.new_writes([ops[d]])[1])
    assert written.new_writes([ops["a"]])[0] == []  # a is now the most recent
    written.record(written.new_writes([ops["c"]])[1])  # b drops out
    assert len(written) == 2
    assert written.new_writes([ops["b"]])[0] == [ops["b"]]
    assert written.new_writes([ops["a"]])[0] == [] and written.new_writes([ops["c"]])[0] == []


# -- the projector ------------------------------------------------------------------------------


class FlakyIndex(MemoryIndex):
    """Fails bulk requests as ``plan`` says: ``"fail"`` before writing, ``"late"`` after; counts
    the documents it was sent."""

    def __init__(self, plan: Sequence[str] = ()) -> None:
        super().__init__()
        self.plan = itertools.chain(plan, itertools.repeat("ok"))
        self.sent = 0

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        self.sent += len(ops)
        step = next(self.plan)
        if step == "fail":
            raise TransientStoreError("injected: index unavailable")
        result = await super().bulk(alias, ops)
        if step == "late":
            raise TransientStoreError("injected: timed out after the bulk landed")
        return result


async def _run(processor: Processor, messages: Sequence[tuple[bytes | None, bytes]], parked: list[Parked],
               offsets: itertools.count[int]) -> None:  # fmt: skip
    async def park(work: Work, exc: BaseException) -> None:
        stage = exc.stage if isinstance(exc, MessageError) else "sink"
        parked.append(Parked(work.event if work.event is not None else work.value, stage, exc))

    sched = KeyedScheduler(processor, park, config=CONFIG)
    works = [Work(("t", 0), next(offsets), k, v) for k, v in messages]
    for w in works:
        processor.prepare(w)
    await run_batch(works, sched, processor, park)
    assert await sched.drain(30)
    await sched.close()


class Pipeline:
    """The agent's batch path and the projector over one driver's store, with a flaky index; the
    projector runs whenever the test says, on whatever change records it is given."""

    def __init__(self, index_plan: Sequence[str] = ()) -> None:
        self.driver = Driver(APP)
        self.index = FlakyIndex(index_plan)
        (agent,), (projection,) = APP.agents, APP.projections
        self.changes: list[tuple[bytes, bytes]] = []

        async def publish(topic: str, records: Sequence[ChangeRecord]) -> None:
            self.changes.extend((key, value) for _, key, value in records)

        topic = APP.change_topic(projection)
        feed = ChangeFeedSink(publish, {topic: projection}, {topic: 3})
        self.mapper = AgentProcessor(agent, [WideColumnSink(self.driver.store), feed], 5.0, (projection,))
        self.projector = ProjectionProcessor(projection, self.driver.store, self.index)
        self.driver.run(self.index.ensure_index(projection.alias, projection.mappings))
        self.driver.index = self.index  # its documents() reads what the projector wrote
        self._offsets = itertools.count()

    def agents(self, events: Sequence[Event | bytes]) -> None:
        raw = [(None, m) if isinstance(m, bytes) else (m.ordering_key.encode(), m.to_json()) for m in events]
        self.driver.run(_run(self.mapper, raw, self.driver.parked, self._offsets))

    def project(self, records: Sequence[tuple[bytes, bytes]]) -> None:
        self.driver.run(_run(self.projector, records, self.driver.parked, self._offsets))

    def close(self) -> None:
        self.driver.close()


def test_a_change_announced_again_is_read_but_not_rewritten() -> None:
    t = Timeline()
    t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    t.add("item.set", {"item": "b", "name": "B", "price": 2}, key="b")
    p = Pipeline()
    try:
        p.agents(list(t))
        p.project(p.changes)
        assert p.index.sent == 2
        p.project(p.changes)  # the same announcements: same documents, same versions
        assert p.index.sent == 2 and p.projector.written.skipped == 2
        p.projector.on_rebalance()  # another worker may have written them meanwhile
        p.project(p.changes)
        assert p.index.sent == 4
    finally:
        p.close()


def test_a_late_older_event_rewrites_the_document_at_the_same_version() -> None:
    """The newer event is projected first; the older one then adds cells without raising the
    partition's version: the document changes at the same version and must be sent."""
    t = Timeline()
    older = t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    newer = t.add("item.flash", {"item": "a", "text": "deal"}, key="a")
    p = Pipeline()
    try:
        p.agents([newer])
        p.project(p.changes)
        [(doc, version)] = p.driver.documents(APP.projections[0]).values()
        assert doc == {"item_id": "a", "flash": "deal"} and version == newer.version
        p.agents([older])
        p.project(p.changes[1:])
        [(doc, version)] = p.driver.documents(APP.projections[0]).values()
        assert doc == {"item_id": "a", "flash": "deal", "name": "A", "price": 1}
        assert version == newer.version and p.index.sent == 2
    finally:
        p.close()


def test_a_failed_bulk_is_not_remembered_so_its_retry_writes_again() -> None:
    t = Timeline()
    t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    p = Pipeline(index_plan=["fail", "late"])
    try:
        p.agents(list(t))
        p.project(p.changes)  # fails, then lands but reports a timeout, then succeeds
        assert p.index.sent == 3 and p.projector.written.skipped == 0
        assert [doc["name"] for doc, _ in p.driver.documents(APP.projections[0]).values()] == ["A"]
        p.project(p.changes)
        assert p.index.sent == 3
    finally:
        p.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    specs=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from(["set", "deleted", "status", "flash"])),
        min_size=1,
        max_size=12,
    ),
)
def test_projecting_while_the_agents_write_ends_in_the_per_event_documents(
    data: st.DataObject, specs: list[tuple[str, str]]
) -> None:
    """Events arrive shuffled with duplicates in batches; between batches the projector runs on
    some of the change records so far, earlier ones announced again among them, and rebalances
    happen; the index fails bulk requests as drawn. Once every record has been projected, the
    documents equal those of one in-order per-event pass."""
    history = _timeline(specs)
    with Driver(APP) as per_event:
        per_event.send(history)
        expected = snapshot(per_event)
    order = data.draw(deliveries(history), label="delivery")
    size = data.draw(st.integers(1, 6), label="batch size")
    plan = data.draw(st.lists(st.sampled_from(["ok", "fail", "late"]), max_size=6), label="index failures")
    p = Pipeline(plan)
    try:
        done = 0
        for i in range(0, len(order), size):
            p.agents(order[i : i + size])
            if data.draw(st.booleans(), label="project now"):
                upto = data.draw(st.integers(done, len(p.changes)), label="records")
                again = data.draw(st.lists(st.integers(0, max(upto - 1, 0)), max_size=3), label="again")
                replay = [p.changes[j] for j in again if j < upto]
                p.project(p.changes[done:upto] + replay)
                done = upto
            if data.draw(st.booleans(), label="rebalance"):
                p.projector.on_rebalance()
        p.project(p.changes[done:])
        got = snapshot(p.driver)
        assert got.tables == expected.tables
        assert got.documents == expected.documents
    finally:
        p.close()
