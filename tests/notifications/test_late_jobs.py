"""The ID-mutation, retention and erasure jobs' entries reach a consumer when their write is slow.

Each job runs on both example apps (activity platform, support desk; ``late_after`` 10 s) over the
real SQLite store. ``SlowStore`` (a test double around the real store, since no store can be told
to be slow) holds the job's write of its batch (the ``apply`` with its data) until the test lets it
land; meanwhile another writer records an entry and a ``NotificationReader`` with ``settle`` above
``late_after`` reads and commits past both stamps. Before the jobs stamped through
``write_stamped``, their entries carried the time they were built, behind that checkpoint, and
the consumer never saw the job's keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from examples.activity_platform.app import app as activity_platform
from examples.support_desk.app import app as support_desk
from framework import App
from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.mutations import CellValue, Delete, Mutation, Upsert
from framework.core.schema import TableSchema
from framework.erasure.declare import Subject
from framework.erasure.run import erase
from framework.erasure.tables import ERASURE_TABLES
from framework.idmutation.apply import apply_id_map
from framework.idmutation.collapse import collapse
from framework.idmutation.requests import IdRequest
from framework.idmutation.steps import StepContext, writes_extra
from framework.jobs.batches import Batch, BatchInput
from framework.jobs.reprojection import PENDING_TABLE
from framework.notifications import NotificationReader
from framework.notifications.entries import Entry, key_ident
from framework.retention.job import ensure_tables, retain_domain
from stores.sqlite import SqliteStore
from tests.notifications.conftest import Clock
from tests.notifications.test_reader import write

SETTLE = 12.0
APPS = [
    pytest.param(activity_platform, id="activity_platform"),
    pytest.param(support_desk, id="support_desk"),
]
DAY_US = 86_400 * 1_000_000


class SlowStore:
    """The real store; the first ``apply`` that ``holds`` waits until the test sets ``gate``."""

    def __init__(self, inner: SqliteStore, holds: Callable[[Sequence[Mutation]], bool]) -> None:
        self.inner, self.holds = inner, holds
        self.held = asyncio.Event()
        self.gate = asyncio.Event()
        self.applies = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        if not self.held.is_set() and self.holds(mutations):
            self.held.set()
            await self.gate.wait()
        await self.inner.apply(mutations)
        self.applies += 1


def _key(schema: TableSchema, **given: CellValue) -> dict[str, CellValue]:
    """A row key of ``schema``: ``given`` values, the other key columns filled in."""
    key: dict[str, CellValue] = {}
    for c in (*schema.partition_key, *schema.clustering_key):
        key[c.name] = given.get(c.name, 1 if c.type in ("int", "bigint") else f"k-{c.name}")
    return key


def _keys(entries: Sequence[Entry], table: str) -> set[str]:
    return {key_ident(k) for e in entries if e.table == table for k in e.keys or ()}


async def _slow_job(
    store: SqliteStore, clock: Clock, tmp_path: Path, slow: SlowStore, job: Awaitable[object]
) -> tuple[list[Entry], list[Entry]]:
    """Run ``job`` until ``slow`` holds its write; another writer records an entry and a consumer
    reads and commits past both stamps; then the write lands (SETTLE + 2 s after the job's stamp)
    and the consumer reads again. (first read, second read)."""
    task = asyncio.ensure_future(job)
    await asyncio.wait_for(slow.held.wait(), 30)
    clock.now += 1
    await write(store, clock, "other", [("o2", "x")])
    clock.now += SETTLE + 1
    cps = SqliteCheckpointStore(tmp_path / "consumer.db")
    try:
        reader = NotificationReader(store, cps, "c", settle=SETTLE, clock=clock)
        first = await reader.read()
        await reader.commit(first)
        assert [e.batch_id for e in first] == ["other"]
        slow.gate.set()
        await task
        clock.now += SETTLE + 1
        second = await reader.read()
        await reader.commit(second)
        assert await reader.read() == []
    finally:
        cps.close_sync()
    return first, second


@pytest.mark.parametrize("app", APPS)
async def test_an_id_mutation_chunk_written_slower_than_settle_reaches_the_consumer(
    app: App, store: SqliteStore, clock: Clock, tmp_path: Path
) -> None:
    assert app.notifications is not None and app.notifications.late_after < SETTLE + 2
    assert app.id_mutation is not None
    owner = app.id_mutation.columns[0]
    schema = next(s for s in app.tables if s.name == owner.table)
    for s in (*app.tables, PENDING_TABLE):  # the re-projections of the owner table's views
        await store.ensure_table(s)
    old = _key(schema, **{owner.tenant_column: "o1", owner.id_column: "old"})
    new = {**old, owner.id_column: "new"}
    column = schema.columns[0].name
    version = int(clock.now * 1_000_000) - DAY_US
    await store.apply([Upsert(owner.table, old, {column: "v"}, version)])
    request = IdRequest(version + 1, "r1", "o1", "convert", "old", "new")
    collapsed = collapse([request])
    slow = SlowStore(store, lambda ms: any(m.table == owner.table for m in ms))
    ctx = StepContext(app, app.id_mutation, slow, None, clock=clock)  # type: ignore[arg-type]
    batch = Batch(1, BatchInput(files=("requests",)), version + 2)
    job = apply_id_map(slow, app.id_mutation, collapsed, clock=clock, extra=writes_extra(ctx, "idm", batch))  # type: ignore[arg-type]

    first, second = await _slow_job(store, clock, tmp_path, slow, job)
    assert not _keys(first, owner.table)
    assert {key_ident(old), key_ident(new)} <= _keys(second, owner.table)  # missed before the fix
    assert await store.read_row(owner.table, old) is None
    moved = await store.read_row(owner.table, new)
    assert moved is not None and moved.values()[column] == "v"


@pytest.mark.parametrize("app", APPS)
async def test_a_retention_chunk_written_slower_than_settle_reaches_the_consumer(
    app: App, store: SqliteStore, clock: Clock, tmp_path: Path
) -> None:
    assert app.notifications is not None and app.notifications.late_after < SETTLE + 2
    await ensure_tables(store, app)
    schema = app.tables[0]
    now_us = int(clock.now * 1_000_000)
    key = _key(schema)
    column = next(c.name for c in schema.columns if c.type == "text" and c.name not in key)
    await store.apply([Upsert(schema.name, key, {column: "old"}, now_us - 2000 * DAY_US)])
    slow = SlowStore(store, lambda ms: any(isinstance(m, Delete) and m.table == schema.name for m in ms))
    job = retain_domain(slow, app, [schema.name], now_us, batch=1, job="retention", clock=clock)  # type: ignore[arg-type]

    first, second = await _slow_job(store, clock, tmp_path, slow, job)
    assert not _keys(first, schema.name)
    assert key_ident(key) in _keys(second, schema.name)  # missed before the fix
    assert await store.read_row(schema.name, key) is None


def _mentions(app: App) -> tuple[TableSchema, dict[str, CellValue], Mapping[str, CellValue]]:
    """A row of ``app``'s first personal-data table that holds ann@x.io in a declared column."""
    declared = app.personal_data[0]
    schema = next(s for s in app.tables if s.name == declared.table)
    return schema, _key(schema), {declared.columns[0]: "ann@x.io"}


@pytest.mark.parametrize("app", APPS)
async def test_an_erasure_written_slower_than_settle_reaches_the_consumer(
    app: App, store: SqliteStore, clock: Clock, tmp_path: Path
) -> None:
    assert app.notifications is not None and app.notifications.late_after < SETTLE + 2
    for s in (*app.tables, *ERASURE_TABLES):
        await store.ensure_table(s)
    schema, key, cells = _mentions(app)
    await store.apply([Upsert(schema.name, key, dict(cells), int(clock.now * 1_000_000) - DAY_US)])
    slow = SlowStore(store, lambda ms: any(isinstance(m, Delete) and m.table == schema.name for m in ms))
    subject = Subject("email", "Ann@X.io")
    job = erase(app, subject, key=b"erasure-test-key-0123456789abcdef", store=slow, clock=clock)

    first, second = await _slow_job(store, clock, tmp_path, slow, job)
    assert not _keys(first, schema.name)
    assert key_ident(key) in _keys(second, schema.name)  # missed before the fix
    row = await store.read_row(schema.name, key)
    assert row is None or not set(cells) & set(row.values())
