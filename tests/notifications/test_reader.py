"""``NotificationReader``: changes since a consumer's checkpoint, commit, settle and retention."""

from __future__ import annotations

import pytest

from framework.coordination import CheckpointConflict, CheckpointStore
from framework.core.mutations import Upsert
from framework.notifications import NotificationGap, NotificationReader, notification_mutations
from stores.sqlite import SqliteStore
from tests.notifications.conftest import Clock

HOUR = 3600.0
DAY = 24 * HOUR


async def write(
    store: SqliteStore, clock: Clock, batch: str, rows: list[tuple[str, str]], app: str = "a"
) -> None:
    """One batch of upserts (tenant, id) of table ``t``, notified at the clock's time."""
    at = int(clock.now * 1e6)
    data = [Upsert("t", {"org_id": o, "id": i}, {"v": 1}, at) for o, i in rows]
    await store.apply(notification_mutations(app, batch, data, None, at, ttl=8 * 86400))


def reader(
    store: SqliteStore, cp: CheckpointStore, clock: Clock, name: str = "c", **kw: object
) -> NotificationReader:
    kw.setdefault("settle", 0)
    return NotificationReader(store, cp, name, clock=clock, **kw)  # type: ignore[arg-type]


def keyset(entries: list) -> set[tuple[str, str]]:
    return {(k["org_id"], k["id"]) for e in entries for k in e.keys}


async def test_read_commit_then_only_newer_entries(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "b1", [("o1", "x"), ("o2", "y")])
    clock.now += 1
    await write(store, clock, "b2", [("o1", "z")])
    r = reader(store, checkpoints, clock)
    first = await r.read()
    assert [(e.batch_id, e.tenant) for e in first] == [("b1", "o1"), ("b1", "o2"), ("b2", "o1")]
    assert keyset(first) == {("o1", "x"), ("o2", "y"), ("o1", "z")}
    assert await r.read() == first  # nothing committed yet: the same entries again
    await r.commit(first)
    assert await r.read() == []
    clock.now += 1
    await write(store, clock, "b3", [("o2", "w")])
    again = reader(store, checkpoints, clock)  # a new process of the same consumer
    assert [e.batch_id for e in await again.read()] == ["b3"]
    other = reader(store, checkpoints, clock, name="other")  # consumers are independent
    assert [e.batch_id for e in await other.read()] == ["b1", "b1", "b2", "b3"]


async def test_pages_across_tenants_and_buckets_are_complete_and_in_order(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    written = []
    for n in range(12):
        clock.now += HOUR / 3 if n % 2 else 1  # several buckets, several days' boundaries not needed
        await write(store, clock, f"b{n}", [(f"o{n % 3}", str(n)), (f"o{(n + 1) % 3}", str(n))])
        written.append(n)
    r = reader(store, checkpoints, clock)
    seen = []
    while page := await r.read(limit=5):
        assert len(page) <= 5
        seen += page
        await r.commit(page)
    positions = [e.position for e in seen]
    assert positions == sorted(positions) and len(set(positions)) == len(positions) == 24
    assert {e.batch_id for e in seen} == {f"b{n}" for n in written}
    other, paged = reader(store, checkpoints, clock, name="pager"), []
    while page := await other.read(limit=7, after=paged[-1].position if paged else None):
        paged += page  # paging without committing
    assert paged == seen


async def test_entries_across_a_day_boundary(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    clock.now = (clock.now // DAY + 1) * DAY - 1  # one second before midnight UTC
    await write(store, clock, "before", [("o", "1")])
    clock.now += 2
    await write(store, clock, "after", [("o", "2")])
    r = reader(store, checkpoints, clock)
    assert [e.batch_id for e in await r.read(limit=1)] == ["before"]
    await r.commit(await r.read(limit=1))
    assert [e.batch_id for e in await r.read()] == ["after"]


async def test_entries_younger_than_settle_wait(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "b1", [("o", "1")])
    r = reader(store, checkpoints, clock, settle=30)
    assert await r.read() == []
    clock.now += 30
    assert [e.batch_id for e in await r.read()] == ["b1"]


async def test_behind_the_retention_is_a_gap_never_silent(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "b1", [("o", "1")])
    r = reader(store, checkpoints, clock, retention=86400)
    await r.commit(await r.read())
    clock.now += 86400 + 1  # the checkpoint is now older than the retention
    await write(store, clock, "b2", [("o", "2")])
    with pytest.raises(NotificationGap) as gap:
        await r.read()
    message = str(gap.value)
    assert "'c' fell behind the notification retention" in message
    assert "converge changes reset --consumer c" in message
    await r.reset(clock.now - 10)  # after re-reading the tables in full
    assert [e.batch_id for e in await r.read()] == ["b2"]


async def test_a_new_consumer_starts_at_the_oldest_retained_or_now(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "old", [("o", "1")])
    clock.now += 2 * 86400
    await write(store, clock, "recent", [("o", "2")])
    clock.now += 1
    assert [e.batch_id for e in await reader(store, checkpoints, clock, retention=86400).read()] == ["recent"]
    latest = reader(store, checkpoints, clock, name="late", start="latest")
    assert await latest.read() == []


async def test_two_instances_of_one_consumer_never_both_commit(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "b1", [("o", "1")])
    a, b = reader(store, checkpoints, clock), reader(store, checkpoints, clock)
    got_a, got_b = await a.read(), await b.read()
    await a.commit(got_a)
    with pytest.raises(CheckpointConflict):
        await b.commit(got_b)


async def test_a_consumer_of_some_tenants(
    store: SqliteStore, checkpoints: CheckpointStore, clock: Clock
) -> None:
    await write(store, clock, "b1", [("o1", "1"), ("o2", "2"), ("o3", "3")])
    r = reader(store, checkpoints, clock, tenants={"o1", "o3"})
    assert [e.tenant for e in await r.read()] == ["o1", "o3"]
