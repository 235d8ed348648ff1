"""The projector drops a rewrite identical to its last write of a document, and converges anyway.

The index here is the kit's ``MemoryIndex`` (an in-memory stand-in that
answers like Elasticsearch, external versions included), wrapped to fail
bulk requests as a test draws; the store is the real SQLite engine in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framework.runtime.projector as projector_module
from framework import Event
from framework.runtime.batch import run_batch
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.errors import MessageError
from framework.runtime.processor import AgentProcessor, Processor
from framework.runtime.projector import ProjectionProcessor, project_partition
from framework.runtime.scheduler import KeyedScheduler
from framework.runtime.sinks import WideColumnSink
from framework.runtime.work import Work
from framework.runtime.written import WrittenDocuments
from framework.testing import Driver, Timeline, deliveries
from framework.testing.driver import Parked
from framework.testing.index import MemoryIndex
from stores.base import BulkResult, IndexOp
from stores.errors import TransientStoreError
from tests.runtime.test_batch_equivalence import CONFIG
from tests.testing.apps import shop

APP = shop()


# -- WrittenDocuments ---------------------------------------------------------------------------

TP = ("changes", 0)
HEARD = {"a": (TP, 3), "b": (TP, 3)}  # the records naming the documents now
READ = {TP: 3}  # the read behind the writes began with offsets up to 3 in the topic


def test_an_identical_covered_write_is_dropped_and_any_difference_is_sent() -> None:
    written = WrittenDocuments()
    first = [IndexOp("a", 5, {"x": 1, "y": [1, 2]}), IndexOp("b", 5, None)]
    send, records = written.new_writes(first, HEARD, READ)
    assert send == first and written.skipped == 0
    written.record(records)
    again = [IndexOp("a", 5, {"y": [1, 2], "x": 1}), IndexOp("b", 5, None)]  # key order does not matter
    assert written.new_writes(again, HEARD, READ) == ([], []) and written.skipped == 2
    changed = [
        IndexOp("a", 5, {"x": 2, "y": [1, 2]}),  # same version, other content: a late older event
        IndexOp("a", 6, {"x": 1, "y": [1, 2]}),  # other version
        IndexOp("b", 6, None),
        IndexOp("b", 5, {"x": 1}),  # a delete, then a document at the same version
        IndexOp("c", 5, {"x": 1}),  # never written
    ]
    for op in changed:
        assert written.new_writes([op], HEARD, READ)[0] == [op], op


def test_an_identical_write_is_sent_when_a_record_names_it_that_its_read_did_not_cover() -> None:
    written = WrittenDocuments()
    op = IndexOp("a", 5, {"x": 1})
    written.record(written.new_writes([op], {"a": (TP, 3)}, READ)[1])
    assert written.new_writes([op], {"a": (TP, 2)}, READ)[0] == []  # in the topic before the read
    assert written.new_writes([op], {"a": (TP, 3)}, READ)[0] == []
    for heard in ({"a": (TP, 4)}, {"a": (("changes", 1), 0)}, {}, None):  # later, elsewhere, unknown
        assert written.new_writes([op], heard, READ)[0] == [op], heard
    assert written.skipped == 2
    written.record(written.new_writes([op], {"a": (TP, 4)}, {})[1])  # nothing known in the topic
    assert written.new_writes([op], {"a": (TP, 0)}, READ)[0] == [op]


def test_nothing_is_remembered_before_record_nor_after_forget() -> None:
    written = WrittenDocuments()
    op = IndexOp("a", 1, {"x": 1})
    _, records = written.new_writes([op], HEARD, READ)
    assert written.new_writes([op], HEARD, READ)[0] == [op]  # not recorded: the write may have failed
    written.record(records)
    assert written.new_writes([op], HEARD, READ)[0] == []
    written.forget()
    assert len(written) == 0 and written.new_writes([op], HEARD, READ)[0] == [op]


def test_a_document_that_cannot_be_digested_is_always_sent() -> None:
    written = WrittenDocuments()
    for op in (IndexOp("a", 1, {"when": object()}), IndexOp("b", 1, {"text": "\ud800"})):
        send, records = written.new_writes([op], HEARD, READ)
        assert send == [op] and records == []
        written.record(records)
        assert written.new_writes([op], HEARD, READ)[0] == [op]


def test_the_least_recently_written_documents_are_dropped_beyond_capacity() -> None:
    written = WrittenDocuments(capacity=2)
    ops = {d: IndexOp(d, 1, {"d": d}) for d in "abc"}
    heard = {d: (TP, 0) for d in "abc"}
    for d in "ab":
        written.record(written.new_writes([ops[d]], heard, READ)[1])
    assert written.new_writes([ops["a"]], heard, READ)[0] == []  # a is now the most recent
    written.record(written.new_writes([ops["c"]], heard, READ)[1])  # b drops out
    assert len(written) == 2
    assert written.new_writes([ops["b"]], heard, READ)[0] == [ops["b"]]
    assert written.new_writes([ops["a"]], heard, READ)[0] == []
    assert written.new_writes([ops["c"]], heard, READ)[0] == []


# -- the projector ------------------------------------------------------------------------------


class FlakyIndex(MemoryIndex):
    """Fails bulk requests as ``plan`` says: ``"fail"`` before writing, ``"late"`` after; keeps
    the size of every bulk request it was sent."""

    def __init__(self, plan: Sequence[str] = ()) -> None:
        super().__init__()
        self.plan = itertools.chain(plan, itertools.repeat("ok"))
        self.bulks: list[int] = []

    @property
    def sent(self) -> int:
        """Documents sent in every bulk request so far."""
        return sum(self.bulks)

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        self.bulks.append(len(ops))
        step = next(self.plan)
        if step == "fail":
            raise TransientStoreError("injected: index unavailable")
        result = await super().bulk(alias, ops)
        if step == "late":
            raise TransientStoreError("injected: timed out after the bulk landed")
        return result


async def _run(processor: Processor, works: Sequence[Work], parked: list[Parked]) -> None:
    async def park(work: Work, exc: BaseException) -> None:
        stage = exc.stage if isinstance(exc, MessageError) else "sink"
        parked.append(Parked(work.event if work.event is not None else work.value, stage, exc))

    sched = KeyedScheduler(processor, park, config=CONFIG)
    for w in works:
        processor.prepare(w)
    await run_batch(list(works), sched, processor, park)
    assert await sched.drain(30)
    await sched.close()


class Pipeline:
    """The agent's batch path and the projector over one driver's store, with a flaky index; the
    projector runs whenever the test says, on whatever change records it is given. ``changes`` is
    the change topic (one partition): a record's offset is its place in it. With ``highwater`` the
    projector knows every record published so far is in the topic, as a consumer's high
    watermark tells it; without, only the records it has taken."""

    def __init__(self, index_plan: Sequence[str] = (), *, highwater: bool = False) -> None:
        self.driver = Driver(APP)
        self.index = FlakyIndex(index_plan)
        (agent,), (projection,) = APP.agents, APP.projections
        self.projection = projection
        self.changes: list[tuple[bytes, bytes]] = []

        async def publish(topic: str, records: Sequence[ChangeRecord]) -> None:
            self.changes.extend((key, value) for _, key, value in records)

        topic = APP.change_topic(projection)
        feed = ChangeFeedSink(publish, {topic: projection}, {topic: 1})
        self.mapper = AgentProcessor(agent, [WideColumnSink(self.driver.store), feed], 5.0, (projection,))
        self.projector = ProjectionProcessor(projection, self.driver.store, self.index)
        if highwater:
            self.projector.highwater = lambda tp: len(self.changes) if tp == TP else None
        self.driver.run(self.index.ensure_index(projection.alias, projection.mappings))
        self.driver.index = self.index  # its documents() reads what the projector wrote
        self._offsets = itertools.count()

    def agents(self, events: Sequence[Event | bytes]) -> None:
        works = [
            Work((APP.agents[0].topic, 0), next(self._offsets), *(
                (None, m) if isinstance(m, bytes) else (m.ordering_key.encode(), m.to_json())))
            for m in events
        ]  # fmt: skip
        self.driver.run(_run(self.mapper, works, self.driver.parked))

    def project(self, offsets: Iterable[int]) -> None:
        """Deliver the change records at ``offsets`` (again, for one already delivered)."""
        works = [Work(TP, i, *self.changes[i]) for i in offsets]
        self.driver.run(_run(self.projector, works, self.driver.parked))

    def other_writer(self, item: str) -> None:
        """Another writer (erasure, repair, a re-projection) indexes the item's current document."""
        self.driver.run(project_partition(self.driver.store, self.index, self.projection, {"item_id": item}))

    def document(self) -> dict[str, tuple[dict[str, Any], int]]:
        return self.driver.documents(self.projection)

    def close(self) -> None:
        self.driver.close()


def test_a_change_announced_again_is_read_but_not_rewritten() -> None:
    t = Timeline()
    t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    t.add("item.set", {"item": "b", "name": "B", "price": 2}, key="b")
    p = Pipeline()
    try:
        p.agents(list(t))
        p.project(range(len(p.changes)))
        assert p.index.sent == 2
        p.project(range(len(p.changes)))  # redelivered: same documents, same versions
        assert p.index.sent == 2 and p.projector.written.skipped == 2
        p.projector.on_rebalance()  # another worker may have written them meanwhile
        p.project(range(len(p.changes)))
        assert p.index.sent == 4
    finally:
        p.close()


def test_a_record_in_the_topic_before_the_read_is_not_rewritten() -> None:
    """Two batches changed the item before the projector read it: the second record brings
    nothing new when the consumer's high watermark says it was in the topic before the read,
    and is written again when the projector cannot tell."""
    for highwater, sent in ((True, 1), (False, 2)):
        t = Timeline()
        first = t.add("item.set", {"item": "a", "name": "A"}, key="a")
        second = t.add("item.set", {"item": "a", "price": 2}, key="a")
        p = Pipeline(highwater=highwater)
        try:
            p.agents([first])
            p.agents([second])
            p.project([0])
            p.project([1])
            assert p.index.sent == sent and p.projector.written.skipped == 2 - sent
            assert p.document() == {"a": ({"item_id": "a", "name": "A", "price": 2}, second.version)}
        finally:
            p.close()


def test_another_writer_between_two_same_version_changes_is_overwritten() -> None:
    """Issue 22 follow-up (regression): the projector wrote the item at the version of its flash
    cell; late older events change its name and change it back, both below that version, and
    another writer indexes the document in between. The projector then reads the very document it
    wrote at the very version, but records announced after its read name it: it must write it."""
    t = Timeline()
    first = t.add("item.set", {"item": "a", "name": "A"}, key="a")
    other = t.add("item.set", {"item": "a", "name": "B"}, key="a")
    back = t.add("item.set", {"item": "a", "name": "A"}, key="a")
    flash = t.add("item.flash", {"item": "a", "text": "deal"}, key="a")
    wrote = {"item_id": "a", "name": "A", "flash": "deal"}
    for highwater in (True, False):
        p = Pipeline(highwater=highwater)
        try:
            p.agents([first, flash])
            p.project([0])
            assert p.document() == {"a": (wrote, flash.version)}
            p.agents([other])  # record 1
            p.other_writer("a")  # e.g. a repair or an erasure's re-projection
            assert p.document() == {"a": ({**wrote, "name": "B"}, flash.version)}
            p.agents([back])  # record 2: the store holds the projector's last write again
            p.project([1, 2])
            assert p.document() == {"a": (wrote, flash.version)}
            assert p.projector.written.skipped == 0
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
        p.project([0])
        assert p.document() == {"a": ({"item_id": "a", "flash": "deal"}, newer.version)}
        p.agents([older])
        p.project([1])
        full = {"item_id": "a", "flash": "deal", "name": "A", "price": 1}
        assert p.document() == {"a": (full, newer.version)}
        assert p.index.sent == 2
    finally:
        p.close()


def test_a_batch_naming_more_documents_than_one_bulk_takes_is_written_in_several(monkeypatch: Any) -> None:
    monkeypatch.setattr(projector_module, "MAX_DOCUMENTS", 3)
    t = Timeline()
    events = {f"i{n}": t.add("item.set", {"item": f"i{n}", "name": f"N{n}"}, key=f"i{n}") for n in range(8)}
    p = Pipeline()
    try:
        p.agents(list(events.values()))
        p.project(range(len(p.changes)))
        assert p.index.bulks == [3, 3, 2]
        want = {k: ({"item_id": k, "name": "N" + k[1:]}, e.version) for k, e in events.items()}
        assert p.document() == want
    finally:
        p.close()


def test_a_failed_bulk_is_not_remembered_so_its_retry_writes_again() -> None:
    t = Timeline()
    t.add("item.set", {"item": "a", "name": "A", "price": 1}, key="a")
    p = Pipeline(index_plan=["fail", "late"])
    try:
        p.agents(list(t))
        p.project([0])  # fails, then lands but reports a timeout, then succeeds
        assert p.index.sent == 3 and p.projector.written.skipped == 0
        assert [doc["name"] for doc, _ in p.document().values()] == ["A"]
        p.project([0])
        assert p.index.sent == 3
    finally:
        p.close()


def _history(specs: list[tuple[str, str, int]]) -> list[Event]:
    """Items set (name, price or both) and deleted; no flash (its TTL would need a clock in the model)."""
    t = Timeline()
    for item, kind, value in specs:
        payload: dict[str, object] = {"item": item}
        if kind == "name":
            payload["name"] = f"n{value}"
        elif kind == "price":
            payload["price"] = value
        elif kind == "both":
            payload.update(name=f"n{value}", price=value)
        t.add("item.deleted" if kind == "deleted" else "item.set", payload, key=item)
    return list(t)


def _model(history: Sequence[Event]) -> dict[str, tuple[dict[str, Any], int]]:
    """The catalog documents, straight from the rules: per cell the highest version wins, a row
    delete removes every cell at or below its version, the version is the item's newest event."""
    out: dict[str, tuple[dict[str, Any], int]] = {}
    for item in sorted({str(e.payload["item"]) for e in history}):
        events = [e for e in history if e.payload["item"] == item]
        deleted = max((e.version for e in events if e.type == "item.deleted"), default=-1)
        doc: dict[str, Any] = {}
        for column in ("name", "price"):
            writes = [(e.version, e.payload[column]) for e in events if column in e.payload]
            if writes and max(writes)[0] > deleted:
                doc[column] = max(writes)[1]
        if doc:
            out[item] = ({"item_id": item, **doc}, max(e.version for e in events))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    specs=st.lists(
        st.tuples(
            st.sampled_from("ab"),
            st.sampled_from(["name", "name", "price", "both", "deleted"]),
            st.integers(0, 1),
        ),  # fmt: skip
        min_size=1,
        max_size=12,
    ),
    highwater=st.booleans(),
)
def test_projecting_while_the_agents_and_another_writer_write_ends_in_the_store_documents(
    data: st.DataObject, specs: list[tuple[str, str, int]], highwater: bool
) -> None:
    """Events arrive shuffled with duplicates and a replayed tail in batches; between batches the
    projector runs on some of the change records so far, earlier ones delivered again among
    them, another writer indexes some items' current documents, rebalances happen, and the
    index fails bulk requests as drawn. Once every record has been delivered, the index holds
    the model's documents: nothing another writer indexed survives a later change."""
    history = _history(specs)
    order = data.draw(deliveries(history), label="delivery")
    size = data.draw(st.integers(1, 3), label="batch size")
    plan = data.draw(st.lists(st.sampled_from(["ok", "fail", "late"]), max_size=6), label="index failures")
    p = Pipeline(plan, highwater=highwater)
    try:
        done = 0
        for i in range(0, len(order), size):
            p.agents(order[i : i + size])
            if data.draw(st.booleans(), label="project now"):
                upto = data.draw(st.integers(done, len(p.changes)), label="records")
                again = data.draw(st.lists(st.integers(0, max(upto - 1, 0)), max_size=3), label="again")
                p.project([*range(done, upto), *(j for j in again if j < upto)])
                done = upto
            for item in sorted(data.draw(st.sets(st.sampled_from("ab")), label="other writer")):
                p.other_writer(item)
            if data.draw(st.integers(0, 5), label="rebalance") == 0:
                p.projector.on_rebalance()
        p.project(range(done, len(p.changes)))
        expected = _model(history)
        assert p.changes and p.index.sent  # records were published and documents written
        assert p.document() == expected
        assert not p.driver.parked
    finally:
        p.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), names=st.lists(st.integers(0, 1), min_size=2, max_size=6))
def test_same_version_changes_with_another_writer_between_them_end_in_the_store_document(
    data: st.DataObject, names: list[int]
) -> None:
    """The item's newest event comes first; its older name changes then arrive shuffled, duplicated
    and replayed, one batch each, so the document changes (and often changes back) at one
    version. After each batch the projector may take the records so far and another writer may
    index the current document. The index ends with the model's document."""
    t = Timeline()
    sets = [t.add("item.set", {"item": "a", "name": f"n{v}"}, key="a") for v in names]
    newest = t.add("item.set", {"item": "a", "price": 1}, key="a")
    order = [newest, *data.draw(deliveries(sets), label="delivery")]
    p = Pipeline(highwater=data.draw(st.booleans(), label="highwater"))
    try:
        done = 0
        for n, event in enumerate(order, 1):
            p.agents([event])
            if data.draw(st.booleans(), label="project now"):
                p.project(range(done, len(p.changes)))
                done = len(p.changes)
            if n < len(order) and data.draw(st.booleans(), label="other writer"):
                p.other_writer("a")  # not after the last change: the projector must write that
        p.project(range(done, len(p.changes)))
        assert p.document() == _model([newest, *sets]) != {}
        assert not p.driver.parked
    finally:
        p.close()
