"""The ledger on the embedded SQLite store: registration, acknowledgement, buckets, TTL, convergence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.delivery import ledger as ledger_module
from framework.delivery.ledger import DeliveryLedger, UnknownMessages
from framework.delivery.model import Ack, DeliveryError, LedgerConfig, Location, MessageRef
from stores.sqlite.store import SqliteStore
from tests.delivery.conftest import MIN, T0, Clock, snapshot

LOC = Location("activity-events", 3, 41)


async def test_registration_lands_in_the_bucket_of_its_capture_time(
    ledger: DeliveryLedger, clock: Clock
) -> None:
    clock.advance(23 * MIN)
    ref = await ledger.register("m1", "exchange", priority=5, location=LOC)
    assert ref.bucket == clock.us(-3 * MIN) and ref.captured_at == clock.us()
    assert ref.shard == ledger.config.shard_of("m1")
    assert await ledger.resolve("m1") == ref
    (entry,) = await ledger.bucket(ref.bucket)
    assert entry.ref == ref and entry.is_origin and entry.retry == 0 and entry.retries == 0
    assert (entry.priority, entry.location, entry.expect) == (5, LOC, ("search", "timeline"))
    assert entry.missing == ("search", "timeline") and not entry.delivered
    assert await ledger.bucket(ref.bucket + ledger.config.bucket_us) == []


async def test_registering_again_is_idempotent_and_adds_the_location(ledger: DeliveryLedger) -> None:
    ref = await ledger.register("m1", "google")
    first = await snapshot(ledger)
    assert await ledger.register("m1", "google", captured_at=ref.captured_at) == ref
    assert await snapshot(ledger) == first
    await ledger.register("m1", "google", captured_at=ref.captured_at, location=LOC)
    assert (await ledger.read(ref)).location == LOC  # type: ignore[union-attr]


async def test_acks_fill_the_consumer_cells(ledger: DeliveryLedger) -> None:
    ref = await ledger.register("m1", "exchange")
    assert await ledger.ack("m1", "search") is True
    assert (await ledger.read(ref)).missing == ("timeline",)  # type: ignore[union-attr]
    result = await ledger.ack_many([Ack("m1", "timeline"), Ack("m1", "timeline"), Ack("nope", "search")])
    assert result.acked == (Ack("m1", "timeline"),) and result.unknown == ("nope",)
    assert (await ledger.read(ref)).delivered  # type: ignore[union-attr]


async def test_strict_acks_refuse_the_whole_batch_when_one_message_is_unknown(ledger: DeliveryLedger) -> None:
    await ledger.register("m1", "exchange")
    before = await snapshot(ledger)
    with pytest.raises(UnknownMessages) as info:
        await ledger.ack_many([Ack("m1", "search"), Ack("ghost", "search")], strict=True)
    assert info.value.message_ids == ("ghost",)
    assert await snapshot(ledger) == before


async def test_bad_input_is_a_typed_error_and_writes_nothing(ledger: DeliveryLedger) -> None:
    before = await snapshot(ledger)
    cases = [
        lambda: ledger.register("", "s"),
        lambda: ledger.register("m", ""),
        lambda: ledger.register("m", "s", captured_at=-1),
        lambda: ledger.register("m", "s", captured_at=True),
        lambda: ledger.register("m", "s", priority=2**40),
        lambda: ledger.register("m", "s", consumers=["billing"]),
        lambda: ledger.register("m", "s", consumers=[]),
        lambda: ledger.register("m", "s", location=Location("", 0, 0)),
        lambda: ledger.register("m", "s", location=Location("t", 0, -5)),
        lambda: ledger.ack("m", "billing"),
        lambda: ledger.ack("x" * 600, "search"),
        lambda: ledger.register("m\ud800", "s"),
        lambda: ledger.register("m", "s\udc00"),
        lambda: ledger.ack("m\ud800", "search"),
        lambda: ledger.ack("m", "search\n"),
    ]
    for case in cases:
        with pytest.raises(DeliveryError):
            await case()
    assert await snapshot(ledger) == before
    bad_configs = [
        {"consumers": ()},
        {"consumers": ("a", "a")},
        {"consumers": ("Bad",)},
        {"consumers": ("a",), "shards": 0},
        {"consumers": ("a",), "table": "x-y"},
        {"consumers": ("a\n",)},
        {"consumers": ("a",), "table": "ledger\n"},
        {"consumers": ("a",), "bucket_seconds": True},
    ]
    for bad in bad_configs:
        with pytest.raises(DeliveryError):
            LedgerConfig(**bad)  # type: ignore[arg-type]


async def test_a_message_may_expect_only_some_consumers(ledger: DeliveryLedger) -> None:
    ref = await ledger.register("m1", "exchange", consumers=["search"])
    await ledger.ack("m1", "search")
    entry = await ledger.read(ref)
    assert entry is not None and entry.delivered and entry.expect == ("search",)


async def test_rows_expire_after_the_ttl(ledger: DeliveryLedger, clock: Clock) -> None:
    ref = await ledger.register("m1", "exchange")
    clock.advance(7 * 24 * 3600 - 1)
    assert await ledger.resolve("m1") == ref
    clock.advance(2)
    assert await ledger.resolve("m1") is None
    assert await ledger.bucket(ref.bucket) == []


async def test_shards_spread_a_bucket_and_reads_page_through_all(
    store: SqliteStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_module, "_PAGE", 3)
    lg = DeliveryLedger(store, LedgerConfig(consumers=("a",), table="sharded", shards=4), clock=clock)
    await lg.ensure()
    refs = [await lg.register(f"m{i:02d}", "src", captured_at=clock.us(i)) for i in range(20)]
    assert len({r.shard for r in refs}) == 4
    got = await lg.bucket(refs[0].bucket)
    assert sorted(e.ref.message_id for e in got) == [f"m{i:02d}" for i in range(20)]


async def test_declaring_a_new_consumer_adds_a_column_and_keeps_old_rows(
    store: SqliteStore, clock: Clock
) -> None:
    old = DeliveryLedger(store, LedgerConfig(consumers=("search",)), clock=clock)
    await old.ensure()
    ref = await old.register("m1", "exchange")
    await old.ack("m1", "search")
    new = DeliveryLedger(store, LedgerConfig(consumers=("billing", "search")), clock=clock)
    await new.ensure()
    assert [c.name for c in store.schema("delivery_ledger").columns][-2:] == ["ack_search", "ack_billing"]
    entry = await new.read(ref)
    assert entry is not None and entry.expect == ("search",) and entry.delivered
    ref2 = await new.register("m2", "exchange")
    assert (await new.read(ref2)).missing == ("billing", "search")  # type: ignore[union-attr]


async def test_a_later_registration_takes_over_the_acks(ledger: DeliveryLedger, clock: Clock) -> None:
    first = await ledger.register("m1", "exchange")
    clock.advance(15 * MIN)
    second = await ledger.register("m1", "exchange")
    assert await ledger.resolve("m1") == second != first
    await ledger.ack("m1", "search")
    assert (await ledger.read(second)).acked == {"search"}  # type: ignore[union-attr]
    assert (await ledger.read(first)).acked == frozenset()  # type: ignore[union-attr]


# -- convergence -----------------------------------------------------------

_messages = st.lists(
    st.tuples(st.sampled_from(["exchange", "google"]), st.integers(0, 3600), st.booleans()),
    min_size=1,
    max_size=6,
)


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[list[tuple], list[list[tuple]]]:
    """Messages, and two schedules of the same operations (with duplicates) in different orders.

    Causality is kept: a message's first registration precedes its acks (an
    ack is only sent for a delivered, hence registered, message).
    """
    msgs = draw(_messages)
    ops: list[tuple] = []
    for i, (_, _, located) in enumerate(msgs):
        ops.append(("reg", i, False))
        if located:
            ops.append(("reg", i, True))
        for consumer in draw(st.lists(st.sampled_from(["search", "timeline"]), max_size=3)):
            ops.append(("ack", i, consumer))
    schedules = []
    for _ in range(2):
        order = draw(st.permutations(ops))
        dup = draw(st.lists(st.sampled_from(ops), max_size=4)) if ops else []
        seq = [op for op in order + dup]
        seen: set[int] = set()
        causal: list[tuple] = []
        for op in seq:
            if op[0] == "reg":
                seen.add(op[1])
                causal.append(op)
            elif op[1] in seen:
                causal.append(op)
            else:
                causal.insert(0, ("reg", op[1], False))
                seen.add(op[1])
                causal.append(op)
        schedules.append(causal)
    return msgs, schedules


@settings(max_examples=40, deadline=None)
@given(case=_schedules())
def test_any_order_or_duplication_of_registrations_and_acks_gives_the_same_ledger(
    tmp_path_factory: pytest.TempPathFactory, case: tuple
) -> None:
    msgs, schedules = case

    async def run(schedule: list[tuple], path: Path) -> dict:
        store = await SqliteStore.open(path, clock=Clock())
        try:
            lg = DeliveryLedger(
                store, LedgerConfig(consumers=("search", "timeline"), shards=2), clock=Clock()
            )
            await lg.ensure()
            for op in schedule:
                source, offset_s, _ = msgs[op[1]]
                mid = f"m{op[1]}"
                if op[0] == "reg":
                    loc = Location("t", 0, op[1]) if op[2] else None
                    await lg.register(mid, source, captured_at=int((T0 + offset_s) * 1e6), location=loc)
                else:
                    await lg.ack(mid, op[2])
            return await snapshot(lg)
        finally:
            await store.close()

    base = tmp_path_factory.mktemp("conv")
    first = asyncio.run(run(schedules[0], base / "a.db"))
    second = asyncio.run(run(schedules[1], base / "b.db"))
    assert first == second


def test_message_ref_key_round_trip() -> None:
    ref = MessageRef(600_000_000, 1, "exchange", 600_000_123, "m1")
    assert ref.key() == {"bucket": 600_000_000, "shard": 1, "source": "exchange", "captured_at": 600_000_123,
                         "message_id": "m1"}  # fmt: skip
    assert ref.clustering == ("exchange", 600_000_123, "m1")
