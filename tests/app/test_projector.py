"""The projection step on SQLite and the embedded index: document versions cover every write, deletes too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from framework import Delete, Event
from framework.local_stack import StackInfo
from framework.runtime.mapping import map_event
from framework.runtime.projector import project_partition, read_document, write_document
from stores.base import SearchIndex
from stores.open import open_search_index
from stores.sqlite import SqliteStore
from tests.app.toy import ev, toy_app

APP = toy_app()
(PROJECTION,) = APP.projections
KEY = {"note_id": "n1"}


@pytest.fixture()
async def store() -> AsyncIterator[SqliteStore]:
    async with SqliteStore(":memory:") as s:
        for t in APP.tables:
            await s.ensure_table(t)
        yield s


@pytest.fixture()
async def index(stack: StackInfo, request: pytest.FixtureRequest) -> AsyncIterator[SearchIndex]:
    idx = open_search_index(stack.es_url, "document")
    alias = f"notes-{abs(hash(request.node.name)) % 10**8}"
    await idx.ensure_index(alias, PROJECTION.mappings)
    idx.alias = alias  # type: ignore[attr-defined]
    yield idx
    await idx.close()


async def _apply(store: SqliteStore, *events: Event) -> None:
    for e in events:
        await store.apply(map_event(APP.route(e), e, APP.projections))


async def test_a_column_delete_raises_the_document_version(store: SqliteStore, index: SearchIndex) -> None:
    """Upsert(title)@20, Upsert(score)@22, then Delete(score)@25: the cleared document is written at 25,
    so it replaces the one at 22 that still had the score."""
    alias = index.alias  # type: ignore[attr-defined]
    await _apply(store, ev("note.set", "n1", 20, title="t"), ev("note.set", "n1", 22, score=0.5))
    assert await project_partition(store, index, PROJECTION, KEY, alias=alias) == ("index", 22)
    await _apply(store, ev("note.clear", "n1", 25, columns=["score"]))
    doc_id, doc, version = await read_document(store, PROJECTION, KEY)
    assert (doc_id, doc, version) == ("n1", {"title": "t"}, 25)
    assert await project_partition(store, index, PROJECTION, KEY, alias=alias) == ("index", 25)
    hit = await index.get(alias, "n1")
    assert hit is not None and hit.version == 25 and "score" not in hit.source


async def test_a_late_older_write_does_not_lower_the_version(store: SqliteStore, index: SearchIndex) -> None:
    """A write at 23 arriving after the delete at 25 still changes the row; its document keeps version 25."""
    alias = index.alias  # type: ignore[attr-defined]
    await _apply(store, ev("note.set", "n1", 20, title="t"), ev("note.clear", "n1", 25, columns=["score"]))
    await project_partition(store, index, PROJECTION, KEY, alias=alias)
    await _apply(store, ev("note.set", "n1", 23, title="late"))
    assert await project_partition(store, index, PROJECTION, KEY, alias=alias) == ("index", 25)
    hit = await index.get(alias, "n1")
    assert hit is not None and hit.source["title"] == "late"


async def test_a_state_log_entry_counts_and_a_row_delete_removes_the_document(
    store: SqliteStore, index: SearchIndex
) -> None:
    alias = index.alias  # type: ignore[attr-defined]
    await _apply(store, ev("note.set", "n1", 10, title="t"), ev("note.state", "n1", 12, state="done"))
    assert await read_document(store, PROJECTION, KEY) == ("n1", {"title": "t", "state": "done"}, 12)
    await project_partition(store, index, PROJECTION, KEY, alias=alias)
    await store.apply([Delete("note", KEY, 30)])  # a row delete written behind the framework's back ...
    assert (await read_document(store, PROJECTION, KEY))[1:] == (None, 12)  # ... leaves the mark at 12
    action, version = await project_partition(store, index, PROJECTION, KEY, alias=alias, floor=30)
    assert (action, version) == ("delete", 30)  # the floor lifts the delete over the indexed version
    assert await index.get(alias, "n1") is None


async def test_a_partition_written_before_marks_falls_back_to_live_cells(store: SqliteStore) -> None:
    from framework import Upsert

    await store.apply([Upsert("note", KEY, {"title": "old"}, 7)])
    assert await read_document(store, PROJECTION, KEY) == ("n1", {"title": "old"}, 7)


class WriteBetweenReads(SqliteStore):
    """The real SQLite store; the mutations in ``pending`` commit right after the next read
    returns, as a concurrent writer's would between two reads of one document."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.pending: list[list[Any]] = []

    async def _then_write(self) -> None:
        while self.pending:
            await self.apply(self.pending.pop())

    async def read_rows(self, table, keys):  # type: ignore[no-untyped-def]
        out = await super().read_rows(table, keys)
        await self._then_write()
        return out

    async def read_partitions(self, table, partition_keys):  # type: ignore[no-untyped-def]
        out = await super().read_partitions(table, partition_keys)
        await self._then_write()
        return out


async def test_a_write_between_the_reads_of_a_document_never_outlives_the_newer_one(
    index: SearchIndex,
) -> None:
    """A repair reads n1 while the stream writes title "new"@30 and projects it; the repair's
    document, written last, must not bring back "old" (read with the version of the write it
    missed, the index would keep it at 30 over the stream's)."""
    alias = index.alias  # type: ignore[attr-defined]
    async with WriteBetweenReads(":memory:") as store:
        for t in APP.tables:
            await store.ensure_table(t)
        await _apply(store, ev("note.set", "n1", 20, title="old"))
        new = ev("note.set", "n1", 30, title="new")
        store.pending = [map_event(APP.route(new), new, APP.projections)]
        repairs = await read_document(store, PROJECTION, KEY)
        assert not store.pending  # the write did land between the reads
        assert await project_partition(store, index, PROJECTION, KEY, alias=alias) == ("index", 30)
        await write_document(index, alias, repairs)
        hit = await index.get(alias, "n1")
        assert hit is not None and (hit.source["title"], hit.version) == ("new", 30)
