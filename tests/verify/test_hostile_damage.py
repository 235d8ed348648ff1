"""Hostile damage to the index, on a real noida-db (issue 48, items 6-10): every damaged state is
either repaired or reported once, with the reason, and ``converge verify --once`` would exit 1.

- a document edited by hand (a plain ``PUT`` or an ``_update``: the index raises its version by
  one) is rewritten with the rows' content at the version the index holds; one far ahead of its
  mark is parked once; neither is counted or parked again by later sweeps or the change verifier;
- a repair the index refuses (a delete tombstone above the mark) is counted as refused and parked
  once, never as repaired; once the tombstone is removed, the next sweep repairs it;
- an orphan at a version above its partition's future mark is deleted without a tombstone there:
  the stream's later write of the real document is accepted, in both tombstone modes;
- ``2`` written as ``2.0`` is a ``content`` divergence for the verifier, by the rule the Spark
  check digests documents by (``json_codec.canonical``);
- ``converge_verify_behind_seconds`` is 0 when every settled change is verified (idle included),
  and ``converge status --url`` sums up a standalone verifier's endpoint.

Rig: each example app's history through the test kit's ``Driver`` (its SQLite store, its
notification entries), its documents copied into a noida-db index at their versions (the
session's own noida-db, ``stack``), the verifier and its sweeps against that index with a real
dead-letter log; the stream's later writes are the projector's own (``project_partition``).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.json_codec import same_json
from framework.core.projection import Projection
from framework.dlq import DeadLetterWAL
from framework.local_stack import StackInfo
from framework.metrics.snapshot import verify_status
from framework.metrics.verifier_endpoint import serve_verifier_metrics
from framework.notifications.reader import NotificationReader
from framework.runtime.projector import project_partition
from framework.testing import Driver
from framework.verify import CONSUMER, ChangeVerifier
from framework.verify.digests import Ledger
from framework.verify.park import dlq_parker
from framework.verify.sweep import Sweep, SweepReport
from spark_batch.codec import digest, document_text
from stores.base import IndexOp, SearchIndex
from stores.elasticsearch.index import ElasticsearchIndex
from tests.verify.test_verifier import EXAMPLES, Example

SETTLE = 30.0
_TICKS = itertools.count(1)


@dataclass
class Rig:
    d: Driver
    es: ElasticsearchIndex
    view: Projection
    verifier: ChangeVerifier
    sweep: Sweep
    wal: DeadLetterWAL
    clock: list[float]

    def run_sweep(self) -> SweepReport:
        self.clock[0] = self.d.now + 2 * SETTLE + next(_TICKS)  # the ledger's write times rise
        return self.d.run(self.sweep.run())

    def held(self) -> dict[str, tuple[dict[str, Any], int]]:
        async def scan() -> dict[str, tuple[dict[str, Any], int]]:
            await self.es.refresh(self.view.alias)
            return {h.doc_id: (dict(h.source), h.version or 0) async for h in self.es.scan(self.view.alias)}

        return self.d.run(scan())

    def parked(self) -> list[tuple[str, str]]:
        """(document id, category) of every record parked so far."""
        return [(e.record.key.decode(), e.record.error_class) for e in self.wal.iterate()]


async def _fresh_index(es: ElasticsearchIndex, d: Driver) -> None:
    """The app's indices made again in noida-db, holding the driver's documents at their versions."""
    for p in d.app.projections:
        await es.client.indices.delete(index=f"{p.alias}-v1", ignore_unavailable=True)
        await es.ensure_index(p.alias, p.mappings)
        await d.index.refresh(p.alias)
        ops = [IndexOp(h.doc_id, h.version or 0, dict(h.source)) async for h in d.index.scan(p.alias)]
        assert not (await es.bulk(p.alias, ops)).failed
        await es.refresh(p.alias)


@contextmanager
def rig(
    stack: StackInfo,
    tmp_path: Path,
    example: Callable[[], Example],
    *,
    tombstones: str = "document",
    split: float = 1.0,
) -> Iterator[tuple[Example, Rig]]:
    """``example``'s history (its first ``split`` of it) through a driver, its documents in noida-db,
    a verifier and a sweep of every view against it, parking into a dead-letter log."""
    ex = example()
    events = ex.events[: int(len(ex.events) * split)]
    with Driver(ex.app) as d:
        assert d.send(events) == []
        es = ElasticsearchIndex.from_url(stack.es_url, tombstones=tombstones)  # type: ignore[arg-type]
        d.run(_fresh_index(es, d))
        clock = [d.now + 2 * SETTLE]
        checkpoints = SqliteCheckpointStore(str(tmp_path / "checkpoints.db"))
        reader = NotificationReader(d.store, checkpoints, CONSUMER, settle=SETTLE, clock=lambda: clock[0])
        targets: dict[str, SearchIndex] = {p.name: es for p in d.app.projections}
        targets.update({a.name: d.aggregates for a in d.app.aggregates})
        wal = DeadLetterWAL(tmp_path / "dlq")
        park = dlq_parker({v.name: (v, d.app.change_topic(v)) for v in d.app.views}, wal)

        async def no_wait(seconds: float) -> None:
            return None

        v = ChangeVerifier(d.app.views, d.store, targets, reader, park=park, clock=lambda: clock[0],
                           sleep=no_wait, app=d.app.name)  # fmt: skip
        d.run(v.ensure())
        sweep = Sweep(v, Ledger(d.store, d.app.name), clock=lambda: clock[0])
        d.run(sweep.ensure())
        try:
            yield ex, Rig(d, es, d.app.projections[0], v, sweep, wal, clock)
        finally:
            wal.close()
            d.run(es.close())


def _counts(report: SweepReport | ChangeVerifier) -> dict[str, dict[str, int]]:
    stats = report.stats if isinstance(report, ChangeVerifier) else report
    return {what: {c: n for c, n in getattr(stats, what).items() if n}
            for what in ("divergent", "repaired", "parked", "refused")}  # fmt: skip


def _text_field(doc: dict[str, Any]) -> str:
    return next(f for f, v in sorted(doc.items()) if isinstance(v, str) and f in ("subject", "status"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_hand_edits_are_rewritten_and_a_document_far_ahead_is_parked_once(
    stack: StackInfo, tmp_path: Path, example: Callable[[], Example], caplog: pytest.LogCaptureFixture
) -> None:
    """Item 6."""
    from framework.cli.verify import exit_code

    with rig(stack, tmp_path, example) as (ex, r):
        first = r.run_sweep()
        assert first.verified_in_full >= len(ex.documents) and not any(_counts(first).values())
        alias, ids = r.view.alias, sorted(ex.documents)
        put, update, far = ids[0], ids[1], ids[2]
        field = _text_field(ex.documents[put][0])
        client = r.es.client
        r.d.run(client.index(index=alias, id=put, document={**ex.documents[put][0], field: "edited by hand"}))
        r.d.run(client.update(index=alias, id=update, doc={field: "edited by hand"}))
        r.d.run(client.update(index=alias, id=update, doc={field: "edited by hand twice"}))
        far_doc, far_version = {**ex.documents[far][0], field: "written ahead"}, ex.documents[far][1] + 10**6
        r.d.run(r.es.index(alias, far, far_doc, far_version))
        caplog.set_level(logging.WARNING)
        second = r.run_sweep()
        assert _counts(second) == {"divergent": {"ahead": 3}, "repaired": {"ahead": 2},
                                   "parked": {"ahead": 1}, "refused": {}}  # fmt: skip
        held = r.held()
        # the content restored, at the version the hand edits left (one above the mark per edit)
        assert held[put] == (ex.documents[put][0], ex.documents[put][1] + 1)
        assert held[update] == (ex.documents[update][0], ex.documents[update][1] + 2)
        assert held[far] == (far_doc, far_version)  # parked for an operator, untouched
        assert r.parked() == [(far, "ahead")]
        line = [m for m in caplog.messages if "parked" in m and far in m]
        assert len(line) == 1 and "delete the document from the index, then replay" in line[0], line
        assert exit_code(r.verifier.stats) == 1
        # neither counted nor parked again: by the next sweeps, nor by the change verifier
        for _ in range(2):
            again = r.run_sweep()
            assert not any(_counts(again).values()), _counts(again)
        assert again.buckets_differing == 0  # recorded as they are
        while r.d.run(r.verifier.step()):
            pass
        assert _counts(r.verifier) == {"divergent": {"ahead": 3}, "repaired": {"ahead": 2},
                                       "parked": {"ahead": 1}, "refused": {}}  # fmt: skip
        assert r.parked() == [(far, "ahead")]
        # the operator's repair: delete it from the index, replay the record (the projector's write)
        r.d.run(client.delete(index=alias, id=far))
        key = next(e.record for e in r.wal.iterate())
        assert key.topic == r.d.app.change_topic(r.view)
        part = next(k for k in _partitions(r) if r.view.document_id(k) == far)
        assert r.d.run(project_partition(r.d.store, r.es, r.view, part))[0] == "index"
        assert r.held()[far] == ex.documents[far]


def _partitions(r: Rig) -> list[dict[str, Any]]:
    names = r.view.key_names
    seen: dict[str, dict[str, Any]] = {}
    for table in r.view.tables:
        for row in r.d.rows(table.name):
            part = {n: row.key[n] for n in names}
            seen.setdefault(r.view.document_id(part), part)
    return list(seen.values())


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_repair_the_index_refuses_is_reported_once_and_never_counted_repaired(
    stack: StackInfo, tmp_path: Path, example: Callable[[], Example], caplog: pytest.LogCaptureFixture
) -> None:
    """Item 7: a delete tombstone above the mark (``tombstones="document"``, as on noida-db)."""
    from framework.cli.verify import exit_code

    with rig(stack, tmp_path, example) as (ex, r):
        r.run_sweep()
        doc_id = sorted(ex.documents)[0]
        r.d.run(r.es.delete(r.view.alias, doc_id, ex.documents[doc_id][1] + 10**6))
        caplog.set_level(logging.WARNING)
        second = r.run_sweep()
        assert _counts(second) == {"divergent": {"missing": 1}, "repaired": {}, "parked": {},
                                   "refused": {"missing": 1}}  # fmt: skip
        assert r.parked() == [(doc_id, "missing")] and exit_code(r.verifier.stats) == 1
        line = [m for m in caplog.messages if "parked" in m and doc_id in m]
        assert len(line) == 1 and "the index refused the repair" in line[0], line
        for _ in range(2):  # tried again, reported no more
            assert not any(_counts(r.run_sweep()).values())
        assert r.parked() == [(doc_id, "missing")] and doc_id not in r.held()
        # the operator removes the tombstone (a marker document here); the next sweep repairs it
        r.d.run(r.es.client.delete(index=r.view.alias, id=doc_id))
        assert _counts(r.run_sweep())["repaired"] == {"missing": 1}
        assert r.held()[doc_id] == ex.documents[doc_id]


@pytest.mark.parametrize("tombstones", ["document", "native"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_deleting_an_orphan_never_blocks_the_document_written_later(
    stack: StackInfo, tmp_path: Path, example: Callable[[], Example], tombstones: str
) -> None:
    """Item 8: an orphan (no partition yet) at a version above the mark its partition gets later."""
    with rig(stack, tmp_path, example, tombstones=tombstones, split=0.4) as (ex, r):
        r.run_sweep()
        future = sorted(set(ex.documents) - set(r.held()))
        assert future, "every document exists after the first part of the history"
        doc_id = future[0]
        content, _ = next(iter(r.held().values()))
        r.d.run(r.es.index(r.view.alias, doc_id, content, 10**17))
        report = r.run_sweep()
        assert _counts(report) == {"divergent": {"orphaned": 1}, "repaired": {"orphaned": 1},
                                   "parked": {}, "refused": {}}  # fmt: skip
        assert doc_id not in r.held()
        assert r.d.send(ex.events[int(len(ex.events) * 0.4) :]) == []
        part = next(k for k in _partitions(r) if r.view.document_id(k) == doc_id)
        action, version = r.d.run(project_partition(r.d.store, r.es, r.view, part))
        assert action == "index" and version < 10**17
        assert r.held()[doc_id] == r.d.documents(r.view)[doc_id] == ex.documents[doc_id]


@pytest.mark.parametrize("example", EXAMPLES)
def test_an_integer_written_as_a_float_is_content_for_the_verifier_as_for_the_spark_check(
    stack: StackInfo, tmp_path: Path, example: Callable[[], Example]
) -> None:
    """Item 9: one rule, canonical JSON, for the verifier, its sweeps and the Spark check."""
    with rig(stack, tmp_path, example) as (ex, r):
        r.run_sweep()
        doc_id = sorted(ex.documents)[0]
        doc, version = ex.documents[doc_id]
        field = next(f for f, v in sorted(doc.items()) if type(v) is int)
        damaged = {**doc, field: float(doc[field])}
        assert damaged == doc  # Python's == sees no difference
        r.d.run(r.es.index(r.view.alias, doc_id, damaged, version))  # the same version
        stored = r.held()[doc_id][0]
        assert type(stored[field]) is float  # noida-db keeps 2.0 as 2.0
        # the Spark check's digests of the two sides differ, and the verifier's rule agrees
        assert digest(doc) != hashlib.sha1(document_text(stored).encode()).hexdigest()
        assert digest(doc) == hashlib.sha1(document_text(doc).encode()).hexdigest()
        assert not same_json(doc, stored) and same_json(doc, dict(reversed(doc.items())))
        report = r.run_sweep()
        assert _counts(report) == {"divergent": {"content": 1}, "repaired": {"content": 1},
                                   "parked": {}, "refused": {}}  # fmt: skip
        after = r.held()[doc_id]
        assert after == (doc, version) and type(after[0][field]) is int


@pytest.mark.parametrize("example", EXAMPLES)
def test_behind_is_zero_when_caught_up_and_status_sums_up_a_verifiers_endpoint(
    stack: StackInfo, tmp_path: Path, example: Callable[[], Example], capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 10."""
    with rig(stack, tmp_path, example) as (_, r):
        v = r.verifier
        assert v.stats.behind(r.clock[0]) is None  # nothing read yet
        v.batch = 2  # entries a step
        assert r.d.run(v.step()) == 2
        behind = v.stats.behind(r.clock[0])
        assert behind is not None and SETTLE <= behind <= 2 * SETTLE + 1  # the oldest unverified change's age
        while r.d.run(v.step()):
            pass
        assert v.stats.behind(r.clock[0]) == 0.0
        r.clock[0] += 3600  # an hour idle
        assert r.d.run(v.step()) == 0 and v.stats.behind(r.clock[0]) == 0.0
        assert verify_status(v.stats)["behind_seconds"] == 0.0

        async def status() -> int:
            runner, port = await serve_verifier_metrics(lambda: v.stats, 0)
            try:
                return await asyncio.to_thread(main, ["status", "--url", f"http://127.0.0.1:{port}"])
            finally:
                await runner.cleanup()

        capsys.readouterr()
        assert asyncio.run(status()) == 0
        out = capsys.readouterr().out
        assert "no runtime reported" not in out and "verifier metrics from" in out, out
        line = next(x for x in out.splitlines() if x.startswith("verify: ") and "documents verified" in x)
        assert f"{v.stats.verified} documents verified" in line and "behind 0.0s" in line, line
        assert "refused 0" in line
