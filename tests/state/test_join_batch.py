"""The join processor's batch path on a real changelog topic (noida-db) and a real RocksDB book.

A micro-batch writes the store once and sends each partition's join-state
changes once; waiting events wait durably; a bad event is parked alone and
leaves the changelog; failures (the store, the changelog, a refusal) send
the batch to the per-key path and nothing is acknowledged before it is
durable; work of a partition revoked mid-batch is neither acknowledged nor
sent. The failing and counting sinks and the failing changelog are wrappers
around the real ones that inject faults (no real component fails on demand).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from framework import Event
from framework.runtime.sinks import WideColumnSink, Written
from framework.state.changelog import KafkaChangelog
from stores.errors import TransientStoreError
from tests.state.join_app import child, parent_set
from tests.state.join_model import At
from tests.state.join_rig import Member, Offsets, msg_rows, open_store


class Faulty(WideColumnSink):
    """The store sink, counting calls; ``fail`` batch writes fail transiently first, and a
    ``hook`` runs before each batch write; a message whose id is in ``refuse`` is refused."""

    def __init__(self, store: object, fail: int = 0, refuse: frozenset[str] = frozenset(),
                 hook: Callable[[], Awaitable[None]] | None = None) -> None:  # fmt: skip
        super().__init__(store)  # type: ignore[arg-type]
        self.fail, self.refuse, self.hook = fail, refuse, hook
        self.batches = self.singles = 0

    def _check(self, batch: Sequence[Written]) -> None:
        for event, _ in batch:
            if event.payload.get("msg_id") in self.refuse:
                raise ValueError(f"refused {event.event_id}")

    async def write(self, event: Event, mutations: Sequence[object]) -> None:
        self.singles += 1
        self._check([(event, mutations)])  # type: ignore[list-item]
        await super().write(event, mutations)  # type: ignore[arg-type]

    async def write_batch(self, batch: Sequence[Written]) -> None:
        self.batches += 1
        if self.hook is not None:
            await self.hook()
        if self.fail:
            self.fail -= 1
            raise TransientStoreError("injected: store unavailable")
        self._check(batch)
        await super().write_batch(batch)


class FailingSends(KafkaChangelog):
    """The real changelog whose first ``fail`` sends fail (injected)."""

    def __init__(self, real: KafkaChangelog, fail: int) -> None:
        super().__init__(real.topic, real.broker)
        self.fail = fail

    async def send(self, partition: int, records: Sequence[tuple[str, str | None]]) -> int:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("injected: broker unreachable")
        return await super().send(partition, records)


def _oracle(children: list[Event], entries: dict[str, tuple[str, str, int]]) -> dict:
    out = {}
    for c in children:
        if c.payload["conv"] in entries:
            parent, label, v = entries[c.payload["conv"]]
            cells = {"body": c.payload["body"], "conv": c.payload["conv"], "label": label}
            out[(parent, c.payload["msg_id"])] = At(cells, c.version, 16)  # +1 per entry change
    return out


async def _fresh(tmp: Path, store: object, changelog: KafkaChangelog, entries: list[Event]) -> Member:
    """A member on a fresh data dir, fed ``entries``, assigned both partitions (restored)."""
    member = Member(tmp, store, changelog)  # type: ignore[arg-type]
    await member.feed(entries)
    await member.assign([0, 1])
    return member


async def test_a_batch_writes_the_store_once_and_each_partition_changelog_once(
    changelog: KafkaChangelog, tmp_path: Path
) -> None:
    store = await open_store()
    sink = Faulty(store)
    m = Member(tmp_path / "a", store, changelog, sinks=[sink])
    entries = [parent_set("c0", "A", "a", 5), parent_set("c1", "B", "b", 50)]
    await m.feed(entries)
    await m.assign([0, 1])
    off = Offsets()
    kids = [child(f"m{i}", f"c{i % 3}", "x", 10 + i) for i in range(12)]  # c2: no entry yet
    recs = [(i % 2, off(i % 2), k) for i, k in enumerate(kids)]
    await m.batch(recs)
    assert (sink.batches, sink.singles) == (1, 0)
    assert m.processor.outbox.sends == 2  # one per partition
    assert sorted(m.acked) == sorted((p, o) for p, o, _ in recs)
    final = {"c0": ("A", "a", 5), "c1": ("B", "b", 50)}
    assert await msg_rows(store) == _oracle(kids, final)
    waiting = {k.event_id for k in kids if k.payload["conv"] == "c2"}
    assert {eid for _, eid, *_ in m.book.pending()} == waiting
    # a fresh data dir restores exactly this state, waiting events included, and maps them later
    fresh = await _fresh(tmp_path / "b", store, changelog, entries)
    assert fresh.processor.restored_records > 0
    assert (fresh.state(0), fresh.state(1)) == (m.state(0), m.state(1))
    late = parent_set("c2", "C", "c", 7)
    await fresh.feed([late])
    assert await msg_rows(store) == _oracle(kids, final | {"c2": ("C", "c", 7)})
    assert fresh.book.pending() == [] and fresh.processor.remapped == len(waiting)
    await m.close()
    await fresh.close()
    await store.close()


async def test_a_bad_event_of_a_batch_is_parked_alone_and_leaves_the_changelog(
    changelog: KafkaChangelog, tmp_path: Path
) -> None:
    store = await open_store()
    m = Member(tmp_path / "a", store, changelog)
    entries = [parent_set("c0", "A", "a", 5)]
    await m.feed(entries)
    await m.assign([0, 1])
    off = Offsets()
    first = child("m1", "c0", "x", 10)
    await m.batch([(0, off(0), first)])
    assert m.book.load(0, "c-m1") is not None
    bad = Event("c-m1", first.ordering_key, 11, 11, first.type, {**first.payload, "bad": True})
    good = [child(f"m{i}", "c0", "y", 20 + i) for i in (2, 3)]
    recs = [(0, off(0), good[0]), (0, off(0), bad), (1, off(1), good[1])]
    await m.batch(recs)
    assert m.parked == [("c-m1", "map")]
    assert len(m.acked) == 4  # the parked one too: parked is finished
    assert m.book.load(0, "c-m1") is None
    rows = await msg_rows(store)
    assert {("A", "m2"), ("A", "m3")} <= rows.keys()
    fresh = await _fresh(tmp_path / "b", store, changelog, entries)
    assert fresh.book.load(0, "c-m1") is None
    assert (fresh.state(0), fresh.state(1)) == (m.state(0), m.state(1))
    await m.close()
    await fresh.close()
    await store.close()


async def test_failures_send_the_batch_to_the_per_key_path_and_acks_wait_for_the_changelog(
    changelog: KafkaChangelog, tmp_path: Path
) -> None:
    """A store outage, then a changelog outage, then a store refusal of one event: each time the
    batch is run again key by key; only the refused event is parked; every acked event's
    join record is on the changelog as durable."""
    store = await open_store()
    sink = Faulty(store, fail=1, refuse=frozenset({"m4"}))
    flaky = FailingSends(changelog, fail=2)
    m = Member(tmp_path / "a", store, flaky, sinks=[sink])
    entries = [parent_set("c0", "A", "a", 5), parent_set("c1", "B", "b", 6)]
    await m.feed(entries)
    await m.assign([0, 1])
    off = Offsets()
    kids = [child(f"m{i}", f"c{i % 2}", "x", 10 + i) for i in range(8)]
    for chunk in (kids[:3], kids[3:]):
        await m.batch([(int(k.payload["msg_id"][1:]) % 2, off(int(k.payload["msg_id"][1:]) % 2), k)
                       for k in chunk])  # fmt: skip
    assert m.parked == [("c-m4", "sink")]
    assert len(m.acked) == len(kids)
    assert sink.singles > 0 and flaky.fail == 0
    ok = [k for k in kids if k.payload["msg_id"] != "m4"]
    assert await msg_rows(store) == _oracle(ok, {"c0": ("A", "a", 5), "c1": ("B", "b", 6)})
    fresh = await _fresh(tmp_path / "b", store, changelog, entries)
    for k in ok:
        record = fresh.book.load(int(k.payload["msg_id"][1:]) % 2, k.event_id)
        assert record is not None and record["done"], k.event_id
    assert fresh.book.load(0, "c-m4") is None
    assert (fresh.state(0), fresh.state(1)) == (m.state(0), m.state(1))
    await m.close()
    await fresh.close()
    await store.close()


async def test_work_of_a_partition_revoked_mid_batch_is_neither_acked_nor_sent(
    changelog: KafkaChangelog, tmp_path: Path
) -> None:
    store = await open_store()
    holder: list[Member] = []

    async def rebalance() -> None:
        if holder:
            holder.pop().revoke([1])

    sink = Faulty(store, hook=rebalance)
    m = Member(tmp_path / "a", store, changelog, sinks=[sink])
    entries = [parent_set("c0", "A", "a", 5)]
    await m.feed(entries)
    await m.assign([0, 1])
    off = Offsets()
    kids = [child(f"m{i}", "c0", "x", 10 + i) for i in range(6)]
    recs = [(i % 2, off(i % 2), k) for i, k in enumerate(kids)]
    holder.append(m)
    await m.batch(recs)
    assert sorted(m.acked) == [(0, 0), (0, 1), (0, 2)]
    assert await changelog.end(1) == 0  # nothing of partition 1 was sent
    assert m.processor.outbox.mark(1) is None
    # partition 1 comes back: its local copy is not trusted, the redelivered work is run
    await m.assign([1])
    await m.batch([(1, o, k) for _, o, k in recs if _ == 1])
    assert sorted(m.acked)[-3:] == [(1, 0), (1, 1), (1, 2)]
    assert await changelog.end(1) > 0
    rows = await msg_rows(store)
    assert {("A", k.payload["msg_id"]) for k in kids} == rows.keys()
    records = [json.loads(v) for k, v in m.state(1).items() if k.startswith("E")]
    assert len(records) == 3 and all(r["done"] for r in records)
    await m.close()
    await store.close()
