"""Issue 22 case 7: a job writing into a store screens against the erasure deny-list of record.

``adopt_denylist`` (run by ``converge spark backfill`` and ``ingest`` before any
Spark job) refuses a target with no deny-list unless the store of record is
named, and copies a named store's deny-list into the target; the mapper of
both jobs screens with the adopted deny-list (``screen_of``). Real SQLite
store files; the Spark run itself is in ``test_backfill_record.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from framework.core.events import Event
from framework.core.mutations import Upsert
from framework.erasure import DENYLIST_TABLE, Subject, erase, verify
from framework.erasure.record import TARGET, DenylistMissing, adopt_denylist, screen_of
from spark_batch.apps import JobError
from spark_batch.backfill import _Mapper, prepare
from stores.open import open_wide_store, sqlite_url
from tests.erasure.notes_app import app

SPEC = "tests.erasure.notes_app:app"


async def _erase(url: str, key: bytes, *values: str) -> None:
    store = await open_wide_store(url)
    try:
        for t in app.tables:
            await store.ensure_table(t)
        for v in values:
            await erase(app, Subject("email", v), key=key, store=store)
    finally:
        await store.close()


async def _verify(url: str, key: bytes, value: str) -> list:
    store = await open_wide_store(url)
    try:
        return await verify(app, Subject("email", value), key=key, store=store)
    finally:
        await store.close()


def test_a_store_without_a_deny_list_is_refused_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_DENYLIST_STORE", raising=False)
    fresh = sqlite_url(tmp_path / "fresh.db")
    with pytest.raises(DenylistMissing, match="--denylist-store"):
        adopt_denylist(app, fresh)
    with pytest.raises(JobError, match="no erasure deny-list"):  # what the CLI prints as one line
        prepare(SPEC, fresh)
    assert adopt_denylist(app, fresh, TARGET) == 0  # named as the store of record: an empty deny-list
    assert adopt_denylist(app, fresh) == 0  # now it has one


def test_a_named_store_of_record_is_copied_into_the_target(tmp_path: Path, erasure_key: bytes) -> None:
    record, fresh = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "fresh.db")
    asyncio.run(_erase(record, erasure_key, "Ann@X.io", "bo@x.io"))
    # neither has one: the named store becomes the record (a new deployment), the target its replica
    assert adopt_denylist(app, sqlite_url(tmp_path / "other.db"), sqlite_url(tmp_path / "new.db")) == 0
    assert adopt_denylist(app, sqlite_url(tmp_path / "other.db")) == 0  # established now
    assert prepare(SPEC, fresh, denylist_store=record) == ()
    assert asyncio.run(_verify(fresh, erasure_key, "ann@x.io")) == []  # on the target's deny-list too
    assert adopt_denylist(app, fresh, record) == 2  # again: the same two entries


def test_the_job_mapper_screens_with_the_adopted_deny_list(tmp_path: Path, erasure_key: bytes) -> None:
    record, fresh = sqlite_url(tmp_path / "record.db"), sqlite_url(tmp_path / "fresh.db")
    asyncio.run(_erase(record, erasure_key, "ann@x.io"))
    prepare(SPEC, fresh, denylist_store=record)
    ann = Event("e1", "k", 1, 1, "person.set", {"email": "ANN@x.io", "name": "A", "plan": "p"})
    bo = Event("e2", "k", 2, 2, "person.set", {"email": "bo@x.io", "name": "B", "plan": "p"})
    mapper = _Mapper(SPEC, fresh)  # as the ingestion processes build it
    assert mapper.screen is not None and screen_of(app, fresh) is not None
    mapped = [m for e in (ann, bo) if (u := mapper.map(e.to_json())) is not None for m in u[1]]
    assert mapped == [Upsert("person", {"email": "bo@x.io"}, {"name": "B", "plan": "p"}, 2)]
    assert len(asyncio.run(_rows(fresh))) == 1


async def _rows(url: str) -> list:
    store = await open_wide_store(url)
    try:
        return await store.read_partition(DENYLIST_TABLE.name, {"app": app.name})
    finally:
        await store.close()
