"""Every damage class of the fault suite, on both example apps: found and repaired with no false
repair, and how long after the damage (seconds of the test's clock, which the verifier polls once
a second; the settle time, the recheck and the sweep interval are the worker's defaults' order).

Index damage to a document whose change has not been verified yet is found by the change
verifier's screen (the index's copy against the projector's record): a document deleted, edited
at its version, or rewritten by hand one version up; also during an index outage, and when the
document's subject is then erased. What left no notification is found by the next sweep: a
document added by hand that no partition maps to, a store row written past the change feed at a
higher and at an equal write time, a partition deleted from the store directly.

Each app runs through the test kit's ``Driver`` (the real SQLite store in memory; the kit's
``MemoryIndex``, an in-memory stand-in answering like Elasticsearch, since no Elasticsearch server
runs here; the outage is a stand-in too: ``_Outage`` refuses every call while it is down). The
documents are then compared with the app's oracle, changed as the damage that stays changes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.mutations import Delete, Upsert
from framework.core.projection import Projection
from framework.erasure.declare import Subject
from framework.erasure.keyed import ENV_KEY
from framework.erasure.run import erase
from framework.erasure.verify import verify as residue_of
from framework.notifications.reader import NotificationReader
from framework.testing import Driver
from framework.testing.compare import compare_documents
from framework.verify import CONSUMER, ChangeVerifier
from framework.verify.digests import Ledger
from framework.verify.sweep import Sweep
from stores.base import SearchIndex
from stores.errors import TransientStoreError
from tests.verify.test_sweep import held
from tests.verify.test_verifier import EXAMPLES, Example, sent

SETTLE = 30.0
RECHECK = 5.0
SWEEP_EVERY = 60.0
OUTAGE = 45.0  # longer than the settle time: the changes settle while the index is down
#: The figures of every test of this module: (app, damage class) -> seconds from damage to repair.
FIGURES: dict[tuple[str, str], float] = {}


@dataclass
class Clock:
    """The test's clock (epoch seconds): the verifier's, the reader's and the sweep's."""

    now: float

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Outage:
    """A stand-in for an index outage: the driver's index, refusing every call while ``down``."""

    def __init__(self, index: SearchIndex) -> None:
        self._inner, self.down = index, False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise TransientStoreError("index unavailable (the test's outage)")
            return attr(*args, **kwargs)

        return call


@dataclass
class Harness:
    d: Driver
    clock: Clock
    verifier: ChangeVerifier
    sweep: Sweep | None
    errors: list[str] = field(default_factory=list)
    before: list[Callable[[], None]] = field(default_factory=list)  # run at the start of each tick

    def tick(self) -> None:
        """One second of the verifier: a sweep when due, then every settled change verified."""
        for hook in self.before:
            hook()
        try:
            if self.sweep is not None:
                self.d.run(self.sweep.when_due())
            while self.d.run(self.verifier.step()):
                pass
        except TransientStoreError as exc:  # the worker's loop logs it and steps again later
            self.errors.append(str(exc))
        self.clock.now += 1.0

    def until(self, done: Callable[[], bool], limit: float = 600.0) -> float:
        """Tick until ``done``; the seconds it took."""
        start = self.clock.now
        while not done():
            assert self.clock.now - start < limit, self.verifier.stats.to_dict()
            self.tick()
        return self.clock.now - start

    def repaired(self) -> dict[str, int]:
        return {c: n for c, n in self.verifier.stats.repaired.items() if n}

    def divergent(self) -> dict[str, int]:
        return {c: n for c, n in self.verifier.stats.divergent.items() if n}


def harness(d: Driver, path: Path, *, sweeps: bool, index: Any = None) -> Harness:
    """A verifier of every view of ``d``'s app (the projections' index: ``index``, default the
    driver's), with sweeps every ``SWEEP_EVERY`` seconds when ``sweeps``."""
    path.mkdir(parents=True, exist_ok=True)
    clock = Clock(d.now)
    checkpoints = SqliteCheckpointStore(str(path / "checkpoints.db"))
    reader = NotificationReader(d.store, checkpoints, CONSUMER, settle=SETTLE, clock=clock)
    targets: dict[str, Any] = {p.name: index or d.index for p in d.app.projections}
    targets.update({a.name: d.aggregates for a in d.app.aggregates})
    v = ChangeVerifier(d.app.views, d.store, targets, reader, recheck=RECHECK, clock=clock,
                       sleep=clock.sleep, app=d.app.name)  # fmt: skip
    d.run(v.ensure())
    sweep = None
    if sweeps:
        sweep = Sweep(v, Ledger(d.store, d.app.name), settle=SETTLE, every=SWEEP_EVERY, clock=clock)
        d.run(sweep.ensure())
    return Harness(d, clock, v, sweep)


def _settled(h: Harness) -> None:
    """Every change verified and one sweep done, nothing found: the state before the damage."""
    h.until(lambda: h.verifier.stats.entries > 0 and h.verifier.stats.unverified_since is None
            and (h.sweep is None or h.verifier.stats.sweeps > 0))  # fmt: skip
    assert not h.divergent() and not h.repaired()


def _quiet_after(h: Harness, repaired: dict[str, int]) -> None:
    """Another sweep interval and settle time pass: nothing more is found or repaired."""
    end = h.clock.now + SETTLE + RECHECK + (SWEEP_EVERY + SETTLE if h.sweep is not None else 0.0)
    while h.clock.now < end:
        h.tick()
    assert h.repaired() == repaired and h.divergent() == repaired
    assert not any(h.verifier.stats.parked.values())


def _report(ex: Example, damage: str, seconds: float, bound: float) -> None:
    FIGURES[(ex.app.name, damage)] = seconds
    print(f"time to repair: {ex.app.name}, {damage}: {seconds:.0f} s (bound {bound:.0f} s)")
    assert seconds <= bound


def _subject_doc(ex: Example) -> str:
    return next(d for d in sorted(ex.documents) if "subject" in ex.documents[d][0])


def _source_row(d: Driver, view: Projection, doc_id: str) -> tuple[str, Any]:
    """The first source table of ``view`` and its row holding ``subject`` for ``doc_id``."""
    for table in view.tables:
        for row in d.rows(table.name):
            if view.document_id(row.key) == doc_id and "subject" in row.cells:
                return table.name, row
    raise AssertionError(f"no source row with a subject for {doc_id}")


# -- found by the change verifier --------------------------------------------------------------
#: The settle time, then a recheck for each page of entries naming damage (two here), and a tick.
CHANGE_BOUND = SETTLE + 2 * RECHECK + 2


@pytest.mark.parametrize("example", EXAMPLES)
def test_index_damage_of_changed_documents_is_found_at_the_change_check(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    """Deleted, edited at its version, rewritten one version up: each class on its own documents,
    found by the screen (the record disagrees), repaired by the rebuild."""
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        ids = sorted(ex.documents)
        deleted, altered, bumped = ids[0:2], ids[2:4], ids[4]
        for doc_id in deleted:
            d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        for doc_id in altered:
            doc, version = ex.documents[doc_id]
            d.run(d.index.index(view.alias, doc_id, {**doc, "edited": "by hand"}, version))
        doc, version = ex.documents[bumped]
        d.run(d.index.index(view.alias, bumped, {**doc, "edited": "PUT by hand"}, version + 1))
        h = harness(d, tmp_path, sweeps=False)
        want = {"missing": 2, "content": 2, "ahead": 1}
        seconds = h.until(lambda: h.repaired() == want)
        _quiet_after(h, want)
        assert h.verifier.stats.disagreed == 5  # the screen found exactly the damaged ones
        model = dict(ex.documents)
        model[bumped] = (doc, version + 1)  # the rows' document, at the version the index holds
        assert not compare_documents(model, d.documents(view))
        _report(ex, "index delete, alter, version change", seconds, CHANGE_BOUND)


@pytest.mark.parametrize("example", EXAMPLES)
def test_damage_during_an_index_outage_is_repaired_once_the_index_is_back(
    example: Callable[[], Example], tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        doc_id = sorted(ex.documents)[0]
        d.run(d.index.delete(view.alias, doc_id, ex.documents[doc_id][1]))
        outage = _Outage(d.index)
        h = harness(d, tmp_path, sweeps=False, index=outage)
        back = h.clock.now + OUTAGE

        def outage_until_back() -> None:
            outage.down = h.clock.now < back

        h.before.append(outage_until_back)
        seconds = h.until(lambda: h.repaired() == {"missing": 1})
        _quiet_after(h, {"missing": 1})
        assert h.errors and h.verifier.stats.entries > 0
        assert not compare_documents(ex.documents, d.documents(view))
        _report(ex, "index delete during an index outage", seconds, OUTAGE + 2 * RECHECK + 2)


@pytest.mark.parametrize("example", EXAMPLES)
def test_damage_to_a_document_whose_subject_is_then_erased_leaves_no_residue(
    example: Callable[[], Example], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document of the subject edited by hand (the edit holding the subject's address), then the
    subject erased: the erasure's own projection replaces the edit, the verifier then finds every
    changed document right and repairs nothing; no residue anywhere."""
    key = "erasure-test-key-0123456789abcdef"
    monkeypatch.setenv(ENV_KEY, key)
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        address, doc_id = _subject_of(ex, d, view)
        doc, version = ex.documents[doc_id]
        d.run(d.index.index(view.alias, doc_id, {**doc, "edited": address}, version))
        subject = Subject("email", address)
        d.now += 1.0
        d.run(erase(d.app, subject, key=key.encode(), store=d.store, index=d.index,
                    dlq_root=tmp_path / "dlq"))  # fmt: skip
        h = harness(d, tmp_path / "verify", sweeps=False)
        started = h.clock.now
        _settled(h)
        seconds = h.clock.now - started
        _quiet_after(h, {})
        assert address not in json.dumps(d.documents(view)).lower()
        assert d.run(residue_of(d.app, subject, key=key.encode(), store=d.store, index=d.index,
                                dlq_root=tmp_path / "dlq")) == []  # fmt: skip
        _report(ex, "index alter, then the subject erased (verified)", seconds, CHANGE_BOUND)


def _subject_of(ex: Example, d: Driver, view: Projection) -> tuple[str, str]:
    """An e-mail address in a document of ``view`` and that document's id."""
    for doc_id in sorted(ex.documents):
        text = json.dumps(ex.documents[doc_id][0]).lower()
        for word in text.replace('"', " ").replace(",", " ").split():
            if "@" in word and "." in word.split("@")[-1]:
                return word.strip("[]{}:"), doc_id
    raise AssertionError("no address in the documents")


# -- found by the next sweep ----------------------------------------------------------------------
SWEEP_BOUND = SWEEP_EVERY + SETTLE + 2


@dataclass
class _Past:
    """Damage past the change feed, done after a first clean sweep."""

    name: str
    damage: Callable[[Example, Driver, Projection], dict[str, Any]]  # -> the model's changes


def _orphan(ex: Example, d: Driver, view: Projection) -> dict[str, Any]:
    d.run(d.index.index(view.alias, "added-by-hand", {"made": "up"}, 7))
    return {}


def _row_write(equal: bool) -> Callable[[Example, Driver, Projection], dict[str, Any]]:
    def damage(ex: Example, d: Driver, view: Projection) -> dict[str, Any]:
        doc_id = _subject_doc(ex)
        table, row = _source_row(d, view, doc_id)
        at = row.cells["subject"].writetime if equal else ex.documents[doc_id][1] + 1
        text = "~ written past the change feed"  # "~": above any subject, so it wins a tie
        d.run(d.store.apply([Upsert(table, dict(row.key), {"subject": text}, at)]))
        stored = d.row(table, dict(row.key))
        assert stored is not None and stored.cells["subject"].value == text
        doc, version = ex.documents[doc_id]
        return {doc_id: ({**doc, "subject": text}, version)}

    return damage


def _row_delete(ex: Example, d: Driver, view: Projection) -> dict[str, Any]:
    doc_id = sorted(ex.documents)[1]
    part = _partition(d, view, doc_id)
    d.run(d.store.apply([Delete(t.name, part, ex.documents[doc_id][1] + 1) for t in view.tables]))
    return {doc_id: None}


def _partition(d: Driver, view: Projection, doc_id: str) -> dict[str, Any]:
    for table in view.tables:
        for row in d.rows(table.name):
            if view.document_id(row.key) == doc_id:
                return {n: row.key[n] for n in view.key_names}
    raise AssertionError(doc_id)


PAST = [
    _Past("index orphan (added by hand)", _orphan),
    _Past("store row written past the feed, higher version", _row_write(False)),
    _Past("store row written past the feed, equal version", _row_write(True)),
    _Past("store partition deleted directly", _row_delete),
]


@pytest.mark.parametrize("past", PAST, ids=lambda p: p.name)
@pytest.mark.parametrize("example", EXAMPLES)
def test_damage_past_the_change_feed_is_found_by_the_next_sweep(
    example: Callable[[], Example], past: _Past, tmp_path: Path
) -> None:
    with sent(example) as (ex, d):
        view = d.app.projections[0]
        h = harness(d, tmp_path, sweeps=True)
        _settled(h)
        others = {v.name: held(d, v) for v in d.app.views if v is not view}
        changes = past.damage(ex, d, view)
        seconds = h.until(lambda: sum(h.repaired().values()) > 0)
        model = {k: v for k, v in {**ex.documents, **changes}.items() if v is not None}
        assert not compare_documents(model, d.documents(view))
        found = h.repaired()
        if past.damage is _row_delete:  # the views sharing the partition lose its documents too
            gone = sum(len(set(others[v.name]) - set(held(d, v))) for v in d.app.views if v is not view)
            assert found == {"orphaned": 1 + gone}
        else:
            assert found == {"orphaned": 1} if past.damage is _orphan else found == {"content": 1}
            assert all(held(d, v) == others[v.name] for v in d.app.views if v is not view)
        _quiet_after(h, found)
        _report(ex, past.name, seconds, SWEEP_BOUND)


@pytest.fixture(scope="module", autouse=True)
def _print_figures() -> Iterator[None]:
    started = time.monotonic()
    yield
    if FIGURES:
        print(f"\ntime to repair by damage class ({time.monotonic() - started:.0f} s of tests):")
        for (app, damage), seconds in sorted(FIGURES.items()):
            print(f"  {app}: {damage}: {seconds:.0f} s")
