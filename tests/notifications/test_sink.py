"""``NotificationSink``: the store sink writes one entry per (tenant, bucket, table) of each batch."""

from __future__ import annotations

import pytest

from framework.core.events import Event
from framework.core.mutations import Delete, Upsert
from framework.core.schema import Column, TableSchema
from framework.notifications import NOTIFICATION_TABLE, NotificationConfig, batch_id_of, entry_from_row
from framework.notifications import entries as notification_entries
from framework.notifications.entries import part_id
from framework.notifications.sink import NotificationSink, store_sink
from framework.runtime.sinks import BatchSink, WideColumnSink
from stores.sqlite import SqliteStore
from tests.notifications.conftest import Clock

TICKETS = TableSchema(
    "tickets",
    partition_key=(Column("org_id", "text"), Column("id", "text")),
    columns=(Column("subject", "text"),),
)


def event(n: int, key: str = "k") -> Event:
    return Event(f"ev{n}", key, n, n, "t", {})


def upsert(org: str, id_: str, version: int) -> Upsert:
    return Upsert("tickets", {"org_id": org, "id": id_}, {"subject": f"s{version}"}, version)


async def entries(store: SqliteStore) -> list:
    rows = [r async for r in store.scan(NOTIFICATION_TABLE.name)]
    return sorted((entry_from_row(r) for r in rows), key=lambda e: e.position)


async def test_a_batch_writes_its_data_and_one_entry_per_tenant_and_table(
    store: SqliteStore, clock: Clock
) -> None:
    await store.ensure_table(TICKETS)
    sink = NotificationSink(
        store, "desk", NotificationConfig(count_inserts=True), prefix="tickets-agent", clock=clock
    )
    assert isinstance(sink, BatchSink)
    first = [(event(1), [upsert("o1", "a", 1)]), (event(2), [upsert("o1", "b", 2), upsert("o2", "c", 2)])]
    await sink.write_batch(first)
    clock.now += 1
    second = [
        (event(3), [upsert("o1", "a", 3), upsert("o1", "d", 3)]),
        (event(4), [Delete("tickets", {"org_id": "o1", "id": "b"}, 4)]),
    ]
    await sink.write_batch(second)
    assert (await store.read_row("tickets", {"org_id": "o1", "id": "a"})) is not None  # the data too
    got = await entries(store)
    assert [(e.tenant, e.table, e.inserted, e.updated, e.deleted) for e in got] == [
        ("o1", "tickets", 2, 0, 0),
        ("o2", "tickets", 1, 0, 0),
        ("o1", "tickets", 1, 1, 1),  # d is new, a existed, b deleted
    ]
    assert got[0].batch_id == batch_id_of("tickets-agent", ["ev1", "ev2"]) == got[1].batch_id
    assert got[2].batch_id == batch_id_of("tickets-agent", ["ev3", "ev4"])
    assert {k["id"] for k in got[2].keys} == {"a", "b", "d"} and got[2].last_modified == 4
    assert got[0].app == "desk" and got[2].ingested_at == int(clock.now * 1e6)


async def test_the_per_key_path_writes_the_entry_of_a_batch_of_one(store: SqliteStore, clock: Clock) -> None:
    await store.ensure_table(TICKETS)
    sink = NotificationSink(store, "desk", NotificationConfig(count_inserts=False), prefix="p", clock=clock)
    await sink.write(event(7), [upsert("o1", "a", 7)])
    await sink.write(event(8), [])  # nothing written, nothing announced
    [only] = await entries(store)
    assert only.batch_id == batch_id_of("p", ["ev7"])
    assert (only.inserted, only.updated) == (0, 1)  # without the read, an upsert counts as updated


async def test_past_max_keys_the_keys_go_in_several_entries_and_past_max_parts_one_says_reread(
    store: SqliteStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.ensure_table(TICKETS)
    config = NotificationConfig(max_keys=5, count_inserts=True)
    sink = NotificationSink(store, "desk", config, prefix="p", clock=clock)
    await sink.write_batch([(event(i), [upsert("o1", str(i), i), upsert("o2", "x", i)]) for i in range(6)])
    first, second, small = await entries(store)
    assert (first.tenant, first.reread, first.inserted) == ("o1", False, 5)
    assert (second.tenant, second.reread, second.inserted) == ("o1", False, 1)
    assert second.batch_id == part_id(first.batch_id, 1) == f"{first.batch_id}#2"
    assert sorted(k["id"] for e in (first, second) for k in e.keys or ()) == [str(i) for i in range(6)]
    assert (first.last_modified, second.last_modified) == (4, 5)  # each its keys' highest version
    assert (small.tenant, small.reread, small.inserted) == ("o2", False, 1)
    monkeypatch.setattr(notification_entries, "MAX_PARTS", 1)
    clock.now += 1
    later = NotificationSink(store, "desk", config, prefix="q", clock=clock)
    await later.write_batch([(event(i), [upsert("o1", str(i), 10 + i)]) for i in range(6)])
    big = (await entries(store))[-1]
    assert (big.tenant, big.reread, big.keys, big.updated) == ("o1", True, None, 6)


async def test_writing_the_same_batch_again_at_the_same_time_rewrites_the_same_entry(
    store: SqliteStore, clock: Clock
) -> None:
    await store.ensure_table(TICKETS)
    sink = NotificationSink(store, "desk", NotificationConfig(count_inserts=False), prefix="p", clock=clock)
    batch = [(event(1), [upsert("o1", "a", 1)]), (event(2), [upsert("o1", "b", 2)])]
    await sink.write_batch(batch)
    before = await entries(store)
    await sink.write_batch(list(reversed(batch)))  # a re-run of the batch (same events, same ingestion)
    assert await entries(store) == before and len(before) == 1


def test_store_sink_is_the_plain_store_sink_when_notifications_are_off(store: SqliteStore) -> None:
    from framework.app import App
    from framework.runtime.agent import KeyedAgent

    class Agent(KeyedAgent):
        name, topic, tables = "a", "t", (TICKETS,)

        def handle(self, event: Event) -> list:
            return []

    assert type(store_sink(App("x", agents=[Agent()]), "a", store)) is WideColumnSink
    on = store_sink(App("x", agents=[Agent()], notifications=True), "a", store)
    assert isinstance(on, NotificationSink) and on.config == NotificationConfig() and on.prefix == "a"
