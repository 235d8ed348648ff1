"""Issue 42 item 2: the deny-list of record outlives any one store.

An empty deny-list table (a worker or the test kit created the app's tables)
is not a deny-list of record: a backfill, an ingestion or a worker writing
into such a store is refused unless the store of record is named, whose
deny-list is then merged into it (``framework.erasure.record.settle``).

The property, with both example apps: subjects are erased in a store of
record (a SQLite file); a rebuilt store (the kit's, its tables created) is
refused, then settled from the record and sent the history again, shuffled,
with duplicates or twice, its versions re-spaced 1 µs, 1 ms, 1 s or days
apart. The model (in this test, not the code under test): the subjects are
the lower-cased addresses of the apps' declared payload fields; no erased
one may be found in the rebuilt store, and it keeps what the store built
without the erasure holds, less the erased subjects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.activity_platform.app import app as activity_app
from examples.activity_platform.generator import generate_history as activity_history
from examples.support_desk.app import app as desk_app
from examples.support_desk.generator import generate_history as desk_history
from framework.core.events import Event
from framework.dlq.record import ParkedRecord
from framework.erasure import DENYLIST_TABLE, Subject, erase
from framework.erasure.parked import parked_screen
from framework.erasure.record import RECORD, REPLICA, TARGET, DenylistMissing, read_denylist, settle
from framework.retention.job import retained_tables
from framework.settings import Settings
from framework.testing import Driver
from framework.worker.denylist import DenylistSettler
from spark_batch.apps import JobError
from spark_batch.backfill import _Mapper, prepare
from stores.open import open_wide_store, sqlite_url
from tests.erasure.notes_app import app as notes

NOTES = "tests.erasure.notes_app:app"
SPACINGS = (1, 1_000, 1_000_000, 3 * 86_400_000_000)


async def _with(url: str, use: Any) -> Any:
    store = await open_wide_store(url)
    try:
        return await use(store)
    finally:
        await store.close()


def _erase_in(url: str, app: Any, key: bytes, values: Iterable[str]) -> None:
    async def use(store: Any) -> None:
        for t in app.tables:
            await store.ensure_table(t)
        for v in values:
            await erase(app, Subject("email", v), key=key, store=store)

    asyncio.run(_with(url, use))


def _create_tables(url: str, app: Any) -> None:
    """What a worker or the test kit does first: the app's tables, an empty deny-list among them."""

    async def use(store: Any) -> None:
        for t in app.tables:
            await store.ensure_table(t)

    asyncio.run(_with(url, use))


def _role(url: str, app: Any) -> tuple[str | None, int]:
    async def use(store: Any) -> tuple[str | None, int]:
        d = await read_denylist(store, app)
        return d.role, len(d.entries)

    return asyncio.run(_with(url, use))


# -- the refusals and the merge ---------------------------------------------------------------------


@pytest.mark.parametrize("created", [False, True], ids=["fresh", "tables-created"])
def test_a_backfill_into_a_store_without_a_deny_list_of_record_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, created: bool
) -> None:
    monkeypatch.delenv("CONVERGE_DENYLIST_STORE", raising=False)
    url = sqlite_url(tmp_path / "target.db")
    if created:
        _create_tables(url, notes)
    with pytest.raises(JobError, match="no erasure deny-list of record"):
        prepare(NOTES, url)
    prepare(NOTES, url, denylist_store=TARGET)  # named the store of record: marked, and accepted from then on
    assert _role(url, notes) == (RECORD, 0)
    prepare(NOTES, url)


def test_a_named_store_of_record_is_merged_both_ways(tmp_path: Path, erasure_key: bytes) -> None:
    record, target = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "target.db")
    _erase_in(record, notes, erasure_key, ["ann@x.io", "bo@x.io"])
    _create_tables(target, notes)
    prepare(NOTES, target, denylist_store=record)
    assert _role(target, notes) == (REPLICA, 2)
    assert _role(record, notes) == (RECORD, 2)
    _erase_in(target, notes, erasure_key, ["cy@x.io"])  # an erasure run on the replica reaches the record
    prepare(NOTES, target, denylist_store=record)
    assert _role(record, notes) == (RECORD, 3)
    mapper = _Mapper(NOTES, target)
    cy = Event("e1", "k", 1, 1, "person.set", {"email": "CY@x.io", "name": "C", "plan": "p"})
    mapped = mapper.map(cy.to_json())
    assert mapped is not None and mapped[1] == []  # screened by the merged deny-list


def test_a_store_with_entries_but_no_marker_is_its_own_record(tmp_path: Path, erasure_key: bytes) -> None:
    """Stores written before the marker existed: an erasure ran there, so its deny-list is one."""
    url = sqlite_url(tmp_path / "old.db")
    _erase_in(url, notes, erasure_key, ["ann@x.io"])
    assert _role(url, notes) == (None, 1)
    assert asyncio.run(_with(url, lambda s: settle(notes, s, url, None))) == 1
    assert _role(url, notes) == (RECORD, 1)


def test_an_unestablished_store_of_record_is_seeded_by_an_established_target(
    tmp_path: Path, erasure_key: bytes
) -> None:
    record, target = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "target.db")
    _erase_in(target, notes, erasure_key, ["ann@x.io"])
    prepare(NOTES, target, denylist_store=record)
    assert _role(record, notes) == (RECORD, 1)


def test_the_worker_settles_before_it_consumes(tmp_path: Path, erasure_key: bytes) -> None:
    record, rebuilt = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "rebuilt.db")
    _erase_in(record, notes, erasure_key, ["ann@x.io"])
    _create_tables(rebuilt, notes)
    env = {"CONVERGE_WIDE_STORE": rebuilt, "CONVERGE_DATA_DIR": str(tmp_path / "data")}

    async def start(settler: DenylistSettler) -> int:
        try:
            return await _with(rebuilt, settler.start)
        finally:
            await settler.close()

    with pytest.raises(DenylistMissing, match="no erasure deny-list of record"):
        asyncio.run(start(DenylistSettler(notes, Settings.resolve(notes.name, env=env))))
    named = Settings.resolve(notes.name, env={**env, "CONVERGE_DENYLIST_STORE": record})
    settler = DenylistSettler(notes, named)
    assert settler.elsewhere and asyncio.run(start(settler)) == 1
    assert _role(rebuilt, notes) == (REPLICA, 1)


def test_retention_never_touches_the_deny_list_or_its_marker() -> None:
    for app in (desk_app, activity_app):
        kept = set(retained_tables(app))
        assert DENYLIST_TABLE.name not in kept and "converge_erasure_record" not in kept


def test_a_dlq_replay_withholds_parked_records_of_erased_subjects(tmp_path: Path, erasure_key: bytes) -> None:
    url = sqlite_url(tmp_path / "record.db")
    _erase_in(url, notes, erasure_key, ["ann@x.io"])
    withhold = asyncio.run(_with(url, lambda s: parked_screen(s, notes, erasure_key)))
    assert withhold is not None

    def parked(payload: str, error: str = "") -> ParkedRecord:
        return ParkedRecord("people", "t.people", 0, 1, b"k", payload.encode(), "map", "E", error)

    assert withhold(parked('{"payload": {"email": "ANN@x.io"}}'))
    assert withhold(parked('{"payload": {"to": "bo@x.io,Ann@X.io"}}'))
    assert withhold(parked("{}", error="bad address: ann@x.io."))
    assert not withhold(parked('{"payload": {"email": "bo@x.io", "note": "annie@x.io"}}'))


# -- the property, with both example apps -------------------------------------------------------------


def _respaced(events: Sequence[Event], spacing: int) -> list[Event]:
    ranks = {v: i for i, v in enumerate(sorted({e.version for e in events}))}
    base = 1_600_000_000_000_000
    return [dataclasses.replace(e, version=base + ranks[e.version] * spacing) for e in events]


def _addresses(payload: dict[str, Any]) -> set[str]:
    """The model's subjects of an event: the addresses in the apps' declared payload fields."""
    out: set[str] = set()
    for name in ("requester_email", "actor"):
        if isinstance(payload.get(name), str):
            out.add(payload[name].lower())
    for name in ("participants", "shared_with"):
        out |= {str(a).lower() for a in payload.get(name) or ()}
    return out


def _found(d: Driver, app: Any) -> set[str]:
    """Every subject the store holds, in the declared cells (list members too) and keys."""
    out: set[str] = set()
    for decl in app.personal_data:
        if decl.kind != "email":
            continue
        for row in d.rows(decl.table):
            cells = row.values()
            out |= {m for c in decl.columns for m in decl.members(cells.get(c))}
    return out


def _arrival(rng: random.Random, events: Sequence[Event], mode: str) -> list[Event]:
    sent = list(events)
    rng.shuffle(sent)
    if mode == "duplicated":
        sent += rng.sample(sent, len(sent) // 4)
        rng.shuffle(sent)
    elif mode == "replayed":
        sent += list(events)
    return sent


APPS = {"support_desk": (desk_app, lambda: desk_history(7, 6)), "activity_platform": (activity_app,
        lambda: activity_history(3, 60))}  # fmt: skip
HISTORIES = {name: make() for name, (_, make) in APPS.items()}


@pytest.mark.parametrize("name", sorted(APPS))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**16),
    spacing=st.sampled_from(SPACINGS),
    mode=st.sampled_from(("shuffled", "duplicated", "replayed")),
    erased=st.integers(1, 3),
)
def test_a_rebuilt_store_settled_from_the_record_keeps_erased_subjects_out(
    name: str, erasure_key: bytes, seed: int, spacing: int, mode: str, erased: int
) -> None:
    app = APPS[name][0]
    rng = random.Random(seed)
    events = _respaced(HISTORIES[name].events, spacing)
    subjects = sorted({a for e in events for a in _addresses(e.payload)})
    gone = set(rng.sample(subjects, min(erased, len(subjects))))
    with Driver(app) as before:
        before.send(_arrival(rng, events, "shuffled"))
        kept = _found(before, app)
    with tempfile.TemporaryDirectory() as tmp:
        record = sqlite_url(Path(tmp) / "record.db")
        _erase_in(record, app, erasure_key, [v.upper() if rng.random() < 0.5 else v for v in gone])
        with Driver(app) as rebuilt:  # the kit created its tables: an empty deny-list table
            with pytest.raises(DenylistMissing):
                rebuilt.run(settle(app, rebuilt.store, "rebuilt", None))
            assert rebuilt.run(settle(app, rebuilt.store, "rebuilt", record)) == len(gone)
            rebuilt.send(_arrival(rng, events, mode))
            found = _found(rebuilt, app)
    assert found <= set(subjects) - gone  # the model: no erased subject, nothing outside the history
    assert not found & gone
    if name == "support_desk":  # cell erasure: every other requester's cells stay
        assert found == kept - gone
    else:  # row erasure: a row of an erased subject goes with its other participants
        assert found <= kept - gone and found
