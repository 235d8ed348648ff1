"""Full sweeps on both example apps: a first sweep verifies every document in full and records it;
a later one builds only what was damaged behind the framework's back (index documents deleted,
edited, added; store rows written past the change feed), repairs exactly that, and leaves the
documents equal to the model: the app's oracle, written from the history's ground truth, with
the partitions deleted behind the framework's back taken out.

Same set-up as ``test_verifier`` (the test kit's ``Driver``: real SQLite store in memory, the
kit's ``MemoryIndex`` since no Elasticsearch server runs here).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from examples.support_desk.generator import generate_history as desk_history
from framework import Aggregate, Event, Projection
from framework.aggregates.contributions import NONE
from framework.aggregates.tables import decode_measures, encode_measures, tables_of
from framework.core.mutations import Delete, Upsert
from framework.testing import Driver, deliveries
from framework.testing.compare import compare_documents
from framework.verify.digests import Ledger
from framework.verify.sweep import RETRY, Sweep, SweepReport
from tests.verify.test_verifier import EXAMPLES, Example, sent, support_desk, totals_right, verifier

_TICKS = itertools.count()


def sweep(d: Driver, path: Path) -> SweepReport:
    """One sweep of every view of ``d``'s app, its clock a second later at every sweep (the
    ledger's write times must rise, as the wall clock's do)."""
    at = d.now + next(_TICKS)
    s = Sweep(verifier(d, path), Ledger(d.store, d.app.name), clock=lambda: at)
    d.run(s.ensure())
    return d.run(s.run())


def held(d: Driver, view: Projection) -> dict[str, tuple[dict[str, Any], int]]:
    """What the view's target holds: the index (a projection) or the contributions (an aggregate)."""
    target = d.aggregates if isinstance(view, Aggregate) else d.index
    d.run(target.refresh(view.alias))

    async def scan() -> dict[str, tuple[dict[str, Any], int]]:
        return {h.doc_id: (dict(h.source), h.version or 0) async for h in target.scan(view.alias)}

    return d.run(scan())


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_second_sweep_of_an_unchanged_app_builds_nothing(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        views = d.app.views
        before = {p.name: d.documents(p) for p in d.app.projections}
        first = sweep(d, tmp_path)
        assert first.documents >= len(ex.documents) > 5 and first.index_read >= len(ex.documents)
        assert first.verified_in_full == first.recorded >= len(ex.documents)
        assert sum(first.divergent.values()) == 0 and first.orphans == 0
        second = sweep(d, tmp_path)
        assert second.documents == first.documents and second.rows_read == first.rows_read
        assert second.buckets_differing == 0 and second.verified_in_full == 0 and second.recorded == 0
        assert {p.name: d.documents(p) for p in d.app.projections} == before
        assert len(views) >= 2


@pytest.mark.parametrize("example", EXAMPLES)
def test_damage_nobody_announced_is_found_by_the_next_sweep(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        sweep(d, tmp_path)
        ids = sorted(ex.documents)
        deleted, altered, erased = ids[0:3], ids[3:5], ids[5:7]
        for doc_id in deleted:
            d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        for doc_id in altered:
            doc, version = ex.documents[doc_id]
            d.run(d.index.index(view.alias, doc_id, {**doc, "edited": "by hand"}, version))
        d.run(d.index.index(view.alias, "added-by-hand", {"made": "up"}, 7))
        # rows removed from the store past the change feed: every source row of two partitions
        by_id = {view.document_id({n: r.key[n] for n in view.key_names}): r
                 for t in view.tables for r in d.rows(t.name)}  # fmt: skip
        for doc_id in erased:
            part = {n: by_id[doc_id].key[n] for n in view.key_names}
            d.run(d.store.apply([Delete(t.name, part, 10**18) for t in view.tables]))
        others = {v.name: held(d, v) for v in d.app.views if v is not view}
        report = sweep(d, tmp_path)
        model = {k: v for k, v in ex.documents.items() if k not in erased}
        assert not compare_documents(model, d.documents(view))
        # the other projections lose their documents of the erased partitions, and only those
        gone = 0
        for other in d.app.views:
            if other is view:
                continue
            before, after = others[other.name], held(d, other)
            assert set(before) - set(after) <= set(erased)
            assert {k: v for k, v in before.items() if k not in erased} == after
            gone += len(set(before) - set(after))
        assert report.divergent == {"missing": 3, "content": 2, "orphaned": 3 + gone}
        assert report.repaired == report.divergent and sum(report.parked.values()) == 0
        assert 0 < report.buckets_differing <= 10 * len(d.app.views)
        again = sweep(d, tmp_path)  # records the repaired documents, right now
        assert again.verified_in_full == again.recorded and sum(again.divergent.values()) == 0
        assert sweep(d, tmp_path).buckets_differing == 0


@pytest.mark.parametrize("example", EXAMPLES)
def test_contributions_written_past_the_change_feed_are_found_by_a_sweep(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        sweep(d, tmp_path)
        agg = d.app.aggregates[0]
        t = tables_of(agg)
        row = next(r for r in d.rows(t.contrib.name) if r.cells["measures"].value != NONE)
        entity, series, window = row.key["entity"], row.key["series"], row.key["window"]
        measures = decode_measures(row.cells["measures"].value)
        wrong = encode_measures({k: v + 1000 for k, v in measures.items()})
        member = {"series": series, "window": window, "bucket": agg.bucket_of(str(entity)), "entity": entity}
        d.run(d.store.apply([
            Upsert(t.contrib.name, dict(row.key), {"measures": wrong}, row.version + 5),
            Upsert(t.members.name, member, {"measures": wrong}, row.version + 5),
        ]))  # fmt: skip
        report = sweep(d, tmp_path)
        assert report.divergent == {"content": 1} and report.repaired == {"content": 1}
        assert report.verified_in_full >= 1
        totals_right(d, ex)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delivery=deliveries(desk_history(5, 30).events))
def test_any_delivery_then_damage_is_swept_back_to_the_oracle(
    delivery: list[Event], tmp_path_factory: Any
) -> None:
    ex = support_desk(delivery)
    with Driver(ex.app) as d:
        assert d.send(delivery) == []
        path = tmp_path_factory.mktemp("sweep")
        view = d.app.projections[0]
        sweep(d, path)
        damaged = sorted(ex.documents)[::4]
        for doc_id in damaged:
            doc, version = ex.documents[doc_id]
            d.run(d.index.index(view.alias, doc_id, {**doc, "edited": "by hand"}, version))
        report = sweep(d, path)
        assert report.repaired == {"content": len(damaged)} and report.verified_in_full == len(damaged)
        assert not compare_documents(ex.documents, d.documents(view))


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_fresh_sweep_finds_documents_a_new_projection_code_builds_otherwise(
    example: Callable[[], Example], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger records what the code built: after the projection's code changed, only a sweep
    with ``fresh`` sees the documents whose rows did not change."""
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        sweep(d, tmp_path)
        old = type(view).build

        def build(self: Any, key: Any, rows: Any) -> Any:
            doc = old(self, key, rows)
            return None if doc is None else {**doc, "new_field": 1}

        monkeypatch.setattr(type(view), "build", build)
        assert sum(sweep(d, tmp_path).divergent.values()) == 0  # the records hide them
        s = Sweep(verifier(d, tmp_path), Ledger(d.store, d.app.name), clock=lambda: d.now + next(_TICKS))
        report = d.run(s.run(fresh=True))
        assert report.divergent == {"content": len(ex.documents)} == report.repaired
        model = {k: ({**doc, "new_field": 1}, v) for k, (doc, v) in ex.documents.items()}
        assert not compare_documents(model, d.documents(view))
        assert sweep(d, tmp_path).verified_in_full == 0  # the repaired documents were recorded


def test_sweeps_when_due_and_a_failed_one_again_later(tmp_path: Path) -> None:
    with sent(support_desk) as (_, d):
        now = [d.now]
        s = Sweep(verifier(d, tmp_path), Ledger(d.store, d.app.name), every=100.0, clock=lambda: now[0])
        d.run(s.ensure())
        assert d.run(s.when_due()) is not None  # none yet: at once
        now[0] += 50
        assert d.run(s.when_due()) is None
        now[0] += 60
        real, failing = s._scan_index, True

        async def scan(view: Any, report: SweepReport) -> Any:
            if failing:
                raise ConnectionError("index down")
            return await real(view, report)

        s._scan_index = scan  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            d.run(s.when_due())
        failing = False
        assert d.run(s.when_due()) is None  # not before RETRY seconds
        now[0] += RETRY
        assert d.run(s.when_due()) is not None
        assert s.verifier.stats.sweeps == 2 and s.verifier.stats.last_sweep_at == now[0]
