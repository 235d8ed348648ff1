"""The change verifier on both example apps: damage done behind the framework's back is found
and repaired, and nothing that was right is written.

Each app runs through the test kit's ``Driver`` (the real SQLite store in memory; the kit's
``MemoryIndex``, an in-memory stand-in answering like Elasticsearch, external versions included,
since no Elasticsearch server runs here). The verifier reads the driver's notification entries
with its checkpoint in a real SQLite checkpoint store. After the repair the documents and the
aggregates' totals equal the app's oracle, written from the history's ground truth.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from examples.activity_platform import oracle as activity_oracle
from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk import oracle as desk_oracle
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from framework import App, Event
from framework.aggregates.contributions import NONE
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.mutations import Delete, Upsert
from framework.notifications.reader import NotificationReader
from framework.testing import Driver, deliveries
from framework.testing.compare import compare_documents
from framework.verify import CONSUMER, ChangeVerifier, Divergence
from framework.verify.digests import WRITTEN
from stores.base import SearchIndex

SETTLE = 30.0


@dataclass(frozen=True)
class Example:
    app: App
    events: list[Event]
    documents: dict[str, tuple[dict[str, Any], int]]  # the oracle's, of the app's first projection
    totals: Callable[[], dict[str, Any]]  # the oracle's, per aggregate


def support_desk(events: list[Event] | None = None) -> Example:
    history = desk_history(5, 30)
    truth = history.truth
    return Example(desk_app, events or list(history.events), desk_oracle.expected_state(truth).documents,
                   lambda: desk_oracle.expected_totals(truth))  # fmt: skip


def activity_platform() -> Example:
    history = activity_history(9, 160, n_orgs=2)
    truth, distinct = history.truth, history.distinct()
    return Example(activity_app, list(history.events), activity_oracle.expected_state(truth).documents,
                   lambda: activity_oracle.expected_totals(truth, distinct))  # fmt: skip


EXAMPLES = [support_desk, activity_platform]


def verifier(d: Driver, path: Path, *, parked: list[Divergence] | None = None, **kw: Any) -> ChangeVerifier:
    """A verifier of every view of ``d``'s app, its clock ``SETTLE`` past the driver's."""
    path.mkdir(parents=True, exist_ok=True)
    checkpoints = SqliteCheckpointStore(str(path / "checkpoints.db"))
    reader = NotificationReader(
        d.store, checkpoints, CONSUMER, settle=SETTLE, clock=lambda: d.now + 2 * SETTLE
    )
    targets: dict[str, SearchIndex] = {p.name: d.index for p in d.app.projections}
    targets.update({a.name: d.aggregates for a in d.app.aggregates})

    async def park(divergence: Divergence, reason: str) -> None:
        assert parked is not None, f"unexpected park: {divergence} ({reason})"
        parked.append(divergence)

    async def no_wait(seconds: float) -> None:
        return None

    return ChangeVerifier(d.app.views, d.store, targets, reader, park=park,
                          clock=lambda: d.now + 2 * SETTLE, sleep=kw.pop("sleep", no_wait), **kw)  # fmt: skip


@contextlib.contextmanager
def sent(example: Callable[[], Example]) -> Iterator[tuple[Example, Driver]]:
    """The example's history sent through a driver, nothing parked."""
    ex = example()
    with Driver(ex.app) as d:
        assert d.send(ex.events) == []
        yield ex, d


def drain(d: Driver, v: ChangeVerifier) -> None:
    while d.run(v.step()):
        pass


def totals_right(d: Driver, ex: Example) -> None:
    expected = ex.totals()
    for agg in d.app.aggregates:
        want = expected.get(agg.name)
        if want is not None:
            assert d.totals(agg.name) == want, agg.name


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_converged_run_is_verified_and_nothing_is_written(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        before = d.documents(d.app.projections[0])
        v = verifier(d, tmp_path)
        drain(d, v)
        assert v.stats.verified >= len(ex.documents) > 5 and v.stats.entries > 0
        assert sum(v.stats.divergent.values()) == 0 and sum(v.stats.repaired.values()) == 0
        assert d.documents(d.app.projections[0]) == before
        assert v.stats.lag(0.5) is not None and v.stats.lag(0.99) >= SETTLE  # type: ignore[operator]


@pytest.mark.parametrize("example", EXAMPLES)
def test_documents_deleted_altered_and_left_behind_are_found_and_repaired(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        ids = sorted(ex.documents)
        deleted, altered = ids[0:3], ids[3:6]
        for doc_id in deleted:  # e.g. lost in an index outage past the retries
            d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        for doc_id in altered:  # edited by hand at the same version
            doc, version = ex.documents[doc_id]
            d.run(d.index.index(view.alias, doc_id, {**doc, "edited": "by hand"}, version))
        v = verifier(d, tmp_path)
        drain(d, v)
        assert v.stats.divergent == {"missing": 3, "content": 3}
        assert v.stats.repaired == {"missing": 3, "content": 3}
        assert not compare_documents(ex.documents, d.documents(view))
        again = verifier(d, tmp_path / "again")  # a fresh consumer finds nothing left to repair
        drain(d, again)
        assert again.stats.verified > 0 and sum(again.stats.divergent.values()) == 0


@pytest.mark.parametrize("example", EXAMPLES)
def test_contributions_written_wrong_are_found_and_the_totals_repaired(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        totals_right(d, ex)
        agg = d.app.aggregates[0]
        t = tables_of(agg)
        row = next(r for r in d.rows(t.contrib.name) if r.cells["measures"].value != NONE)
        entity, series, window = row.key["entity"], row.key["series"], row.key["window"]
        wrong = encode_measures(
            {k: v + 1000 for k, v in decode_measures(row.cells["measures"].value).items()}
        )
        member = {"series": series, "window": window, "bucket": agg.bucket_of(str(entity)), "entity": entity}
        d.run(d.store.apply([  # a bad write behind the framework's back, in both tables
            Upsert(t.contrib.name, dict(row.key), {"measures": wrong}, row.version + 5),
            Upsert(t.members.name, member, {"measures": wrong}, row.version + 5),
        ]))  # fmt: skip
        v = verifier(d, tmp_path)
        drain(d, v)
        assert v.stats.divergent == {"content": 1} and v.stats.repaired == {"content": 1}
        assert sum(v.stats.parked.values()) == 0
        totals_right(d, ex)
        assert ex.totals()[agg.name]


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_document_ahead_of_its_mark_is_parked_not_written(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        doc_id = sorted(ex.documents)[0]
        doc, version = ex.documents[doc_id]
        d.run(d.index.index(view.alias, doc_id, {**doc, "edited": "ahead"}, version + 1000))
        parked: list[Divergence] = []
        v = verifier(d, tmp_path, parked=parked)
        drain(d, v)
        assert [(p.doc_id, p.category, p.expected_version, p.index_version) for p in parked] == [
            (doc_id, "ahead", version, version + 1000)
        ]
        assert sum(v.stats.repaired.values()) == 0
        assert d.documents(view)[doc_id] == ({**doc, "edited": "ahead"}, version + 1000)


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_difference_gone_at_the_second_look_is_not_repaired(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    """The projector catching up between the two looks: no divergence, nothing written by the verifier."""
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        doc_id = sorted(ex.documents)[0]
        doc, version = ex.documents[doc_id]
        d.run(d.index.delete(view.alias, doc_id, version))

        async def catch_up(seconds: float) -> None:
            await d.index.index(view.alias, doc_id, doc, version)

        v = verifier(d, tmp_path, sleep=catch_up)
        drain(d, v)
        assert sum(v.stats.divergent.values()) == 0 and sum(v.stats.repaired.values()) == 0
        assert not compare_documents(ex.documents, d.documents(view))


def test_the_checkpoint_keeps_the_position_and_young_entries_wait(tmp_path: Path) -> None:
    ex = support_desk()
    half = len(ex.events) // 2
    with Driver(ex.app) as d:
        d.send(ex.events[:half])
        v = verifier(d, tmp_path)
        drain(d, v)
        first = v.stats.entries
        assert first > 0
        d.now += 2 * SETTLE  # later batches, after the verifier's first pass
        d.send(ex.events[half:])
        d.now -= SETTLE  # the verifier's clock: the new entries are younger than the settle time
        resumed = verifier(d, tmp_path)
        drain(d, resumed)
        assert resumed.stats.entries == 0  # not settled yet, and the old ones are past the checkpoint
        d.now += SETTLE
        drain(d, resumed)
        assert resumed.stats.entries > 0 and sum(resumed.stats.divergent.values()) == 0


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delivery=deliveries(desk_history(5, 30).events))
def test_any_delivery_then_damage_is_repaired_to_the_oracle(
    delivery: list[Event], tmp_path_factory: Any
) -> None:
    ex = support_desk(delivery)
    with Driver(ex.app) as d:
        assert d.send(delivery) == []
        view = d.app.projections[0]
        for doc_id in sorted(ex.documents)[::4]:
            d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        v = verifier(d, tmp_path_factory.mktemp("verify"))
        drain(d, v)
        assert v.stats.repaired == {"missing": len(sorted(ex.documents)[::4])}
        assert not compare_documents(ex.documents, d.documents(view))
        totals_right(d, ex)


class _CountingStore:
    """The driver's real store, counting the partitions the verifier reads from each table."""

    def __init__(self, store: Any) -> None:
        self.store, self.reads = store, collections.Counter[str]()

    async def read_partitions(self, table: str, keys: Any) -> Any:
        self.reads[table] += len(keys)
        return await self.store.read_partitions(table, keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_views_sharing_marks_are_verified_from_one_read(tmp_path: Path) -> None:
    """Every document rebuilt (``sample`` 1): the rows shared by two views are read once."""
    with sent(activity_platform) as (ex, d):
        v = verifier(d, tmp_path, sample=1.0)
        counting = v.store = _CountingStore(d.store)  # type: ignore[assignment]
        drain(d, v)
    shared = {"activities", "engagement_daily"}
    assert {p.name for p in ex.app.views if p.version_table.name == "activities_version"} == shared
    hubs = counting.reads["activity_hub"]
    assert hubs > 5 and counting.reads["engagement_log"] == hubs  # once for both views
    assert v.stats.verified >= 2 * hubs and sum(v.stats.divergent.values()) == 0


@pytest.mark.parametrize("example", EXAMPLES)
def test_agreeing_records_spare_the_rows_and_the_sample_rebuilds_its_share(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    """On a converged run every changed document's record agrees with its mark and its index copy:
    no source row is read at sample 0, and sample 1/2 rebuilds about half of them."""
    with sent(example) as (ex, d):
        v = verifier(d, tmp_path / "none", sample=0.0)
        counting = v.store = _CountingStore(d.store)  # type: ignore[assignment]
        drain(d, v)
        sources = {t.name for view in d.app.views for t in view.tables}
        assert v.stats.screened >= len(ex.documents) > 5
        assert v.stats.disagreed == 0 and v.stats.rebuilt == 0
        assert not any(counting.reads[t] for t in sources), counting.reads
        draws = iter([0.0, 0.9] * v.stats.screened)  # every other partition drawn
        half = verifier(d, tmp_path / "half", sample=0.5, draw=lambda: next(draws))
        drain(d, half)
        assert half.stats.disagreed == 0 and half.stats.sampled == half.stats.rebuilt > 2
        assert sum(half.stats.divergent.values()) == 0


@pytest.mark.parametrize("caught_up", [True, False], ids=["projected-while-waiting", "lost"])
def test_a_document_not_written_yet_is_waited_for_then_rebuilt(caught_up: bool, tmp_path: Path) -> None:
    """A changed document neither recorded nor in the index (the projector behind): the page waits
    for it, screening it again after 1, 2, 4... seconds. Written meanwhile, it is right (nothing rebuilt, no
    divergence); still absent after ``wait``, it is rebuilt and repaired as missing."""
    with sent(support_desk) as (ex, d):
        view = d.app.projections[0]
        doc_id = sorted(ex.documents)[0]
        doc, version = ex.documents[doc_id]
        record = d.row(WRITTEN.name, {"view_name": view.name, "doc_id": doc_id})
        assert record is not None
        d.run(d.index.delete(view.alias, doc_id, version))
        d.run(d.store.apply([Delete(WRITTEN.name, {"view_name": view.name, "doc_id": doc_id}, version)]))
        slept: list[float] = []

        async def projector_catching_up(seconds: float) -> None:
            slept.append(seconds)
            if caught_up and len(slept) == 2:  # as the projector writes: the document, then its record
                await d.index.index(view.alias, doc_id, doc, version)
                cells = {"written": record.cells["written"].value}
                await d.store.apply([Upsert(WRITTEN.name, dict(record.key), cells, version + 1)])

        v = verifier(d, tmp_path, sleep=projector_catching_up, sample=0.0, wait=3.0)
        drain(d, v)
        if caught_up:
            assert slept == [1.0, 2.0] and v.stats.rebuilt == 0
            assert sum(v.stats.divergent.values()) == 0
        else:
            assert slept == [1.0, 2.0, v.recheck] and v.stats.rebuilt == 1
            assert v.stats.divergent == {"missing": 1} == v.stats.repaired
        assert not compare_documents(ex.documents, d.documents(view))


def test_a_batch_of_entries_verifies_each_document_it_names_once(tmp_path: Path) -> None:
    """``batch``: the entries a step reads; a document several of them name is compared once a step."""
    with sent(activity_platform) as (ex, d):
        one = verifier(d, tmp_path / "one", batch=1)
        drain(d, one)
        whole = verifier(d, tmp_path / "whole", batch=100_000)
        assert d.run(whole.step()) == one.stats.entries > 1  # every entry in one step
        assert d.run(whole.step()) == 0
    assert 0 < whole.stats.verified < one.stats.verified
    assert sum(whole.stats.divergent.values()) == sum(one.stats.divergent.values()) == 0


@pytest.mark.parametrize("every", [0.4, 0.0])
def test_run_waits_every_seconds_between_steps_while_caught_up(every: float, tmp_path: Path) -> None:
    """A step that read less than a full batch starts the next ``every`` seconds after its start;
    with ``every`` 0 at once (then ``idle`` once nothing is left)."""
    with sent(support_desk) as (_, d):
        v = verifier(d, tmp_path, batch=100_000, every=every)
        starts: list[tuple[float, int]] = []
        step = v.step

        async def timed() -> int:
            at = time.monotonic()
            done = await step()
            starts.append((at, done))
            return done

        v.step = timed  # type: ignore[method-assign]

        async def run_a_while() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(v.run(stop, idle=0.05))
            await asyncio.sleep(0.3)
            stop.set()
            await task

        d.run(run_a_while())
    assert starts[0][1] > 0  # the first step verified every entry
    if every:
        assert len(starts) == 1  # the next one waits 0.4 s from the first's start: after the stop
    else:
        assert len(starts) >= 3 and starts[1][1] == 0 and starts[1][0] - starts[0][0] < 0.2
