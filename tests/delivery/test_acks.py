"""The ack wire format, the agent sink, and the ack batcher behind the acks-topic agent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from framework.core.events import Event
from framework.core.mutations import Mutation, Upsert
from framework.delivery.ack_agent import AckBatcher, RawAck
from framework.delivery.acks import (
    AckFormatError,
    DeliveryAckSink,
    delivery_sinks,
    encode_ack,
    parse_ack,
    parse_ack_batch,
)
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack, DeliveryError
from framework.dlq import DeadLetterWAL
from framework.runtime.sinks import WideColumnSink
from stores.errors import TransientStoreError
from stores.sqlite.store import SqliteStore
from tests.delivery.conftest import snapshot


def _event(event_id: str) -> Event:
    return Event(event_id, "org:1", 10, 10, "email_upserted", {})


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"{not json", "body"),
        (b"\xff\xfe", "body"),
        (b"[]", "ack"),
        (b'{"message_id": "m"}', "ack.consumer"),
        (b'{"consumer": "search"}', "ack.message_id"),
        (b'{"message_id": "m", "consumer": "search", "extra": 1}', "ack"),
        (b'{"message_id": "", "consumer": "search"}', "ack.message_id"),
        (b'{"message_id": 5, "consumer": "search"}', "ack.message_id"),
        (b'{"message_id": "m", "consumer": "Search!"}', "ack.consumer"),
        (b'{"message_id": "m", "consumer": "search\\n"}', "ack.consumer"),
        (b'{"message_id": "m\\udc00", "consumer": "search"}', "ack.message_id"),
        (b'{"message_id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body"),
        (b'{"message_id": ' + b"1" * 5000 + b', "consumer": "search"}', "body"),
    ],
)
def test_malformed_ack_records_name_the_bad_field(raw: bytes, field: str) -> None:
    with pytest.raises(AckFormatError) as info:
        parse_ack(raw)
    assert info.value.field == field


def test_ack_records_round_trip() -> None:
    ack = Ack("m-1", "search")
    assert parse_ack(encode_ack(ack)) == ack
    assert parse_ack({"message_id": "m-1", "consumer": "search"}) == ack


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"acks": []}, "acks"),
        ({"acks": "m1"}, "acks"),
        ({"acks": [{"message_id": "m", "consumer": "search"}], "more": 1}, "body"),
        ({"ack": []}, "body"),
        ({"acks": [{"message_id": "m", "consumer": "search"}, {"message_id": "m"}]}, "acks[1].consumer"),
        ({"acks": [{"message_id": "m", "consumer": "search"}] * 1001}, "acks"),
    ],
)
def test_malformed_batches_name_the_bad_field(body: object, field: str) -> None:
    with pytest.raises(AckFormatError) as info:
        parse_ack_batch(json.dumps(body).encode())
    assert info.value.field == field


def test_oversized_bodies_are_refused_before_parsing() -> None:
    with pytest.raises(AckFormatError, match="larger than"):
        parse_ack_batch(b" " * ((1 << 20) + 1))


async def test_sink_acks_after_the_store_sink_and_counts_untraced_events(ledger: DeliveryLedger) -> None:
    ref = await ledger.register("e1", "exchange")
    sinks = [WideColumnSink(ledger.store), DeliveryAckSink(ledger, "search")]
    await ledger.store.ensure_table(_hub_schema())
    for event_id in ("e1", "e2"):
        for sink in sinks:
            await sink.write(_event(event_id), _mutations(event_id))
    assert (await ledger.read(ref)).acked == {"search"}  # type: ignore[union-attr]
    assert (sinks[1].acked, sinks[1].untraced) == (1, 1)  # type: ignore[attr-defined]
    assert await ledger.store.read_row("hub", {"id": "e1"}) is not None


def test_sink_refuses_undeclared_consumers(ledger: DeliveryLedger) -> None:
    with pytest.raises(DeliveryError):
        DeliveryAckSink(ledger, "billing")
    with pytest.raises(DeliveryError):
        DeliveryAckSink(ledger, "Not A Name")


def test_delivery_sinks_follow_the_agent_declaration(ledger: DeliveryLedger) -> None:
    class Declared:
        delivery_consumer: ClassVar[str] = "timeline"

    class Silent:
        pass

    (sink,) = delivery_sinks(Declared(), ledger)
    assert isinstance(sink, DeliveryAckSink) and sink.consumer == "timeline"
    assert delivery_sinks(Silent(), ledger) == []


async def test_batcher_writes_good_acks_and_parks_bad_records(ledger: DeliveryLedger, tmp_path: Path) -> None:
    ref1 = await ledger.register("m1", "exchange")
    ref2 = await ledger.register("m2", "exchange")
    failed = DeadLetterWAL(tmp_path / "dlq")
    batcher = AckBatcher(ledger, dlq=failed)
    raws = [
        RawAck("acks", 0, 0, encode_ack(Ack("m1", "search"))),
        RawAck("acks", 0, 1, b"{broken"),
        RawAck("acks", 0, 2, encode_ack(Ack("m2", "billing"))),
        RawAck("acks", 0, 3, encode_ack(Ack("m2", "timeline"))),
        RawAck("acks", 0, 4, None),
        RawAck("acks", 0, 5, encode_ack(Ack("ghost", "search"))),
    ]
    await batcher.process(raws)
    assert (await ledger.read(ref1)).acked == {"search"}  # type: ignore[union-attr]
    assert (await ledger.read(ref2)).acked == {"timeline"}  # type: ignore[union-attr]
    parked = [e.record for e in failed.iterate()]
    assert [(p.offset, p.stage) for p in parked] == [(1, "parse"), (2, "parse"), (4, "parse")]
    assert parked[1].value == encode_ack(Ack("m2", "billing"))
    s = batcher.stats
    assert (s.batches, s.acked, s.unknown, s.malformed, s.retries) == (1, 2, 1, 3, 0)
    failed.close()


class FlakyStore(SqliteStore):
    """Fault injection: the real SQLite store, whose first ``failures`` writes raise a transient error."""

    failures = 0

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise TransientStoreError("injected: store busy")
        await super().apply(mutations)


async def test_batcher_retries_transient_store_errors_until_durable(tmp_path: Path) -> None:
    from framework.delivery.model import LedgerConfig

    store = await FlakyStore.open(tmp_path / "flaky.db")
    try:
        lg = DeliveryLedger(store, LedgerConfig(consumers=("search",)))
        await lg.ensure()
        ref = await lg.register("m1", "exchange")
        store.failures = 3  # type: ignore[attr-defined]
        delays: list[float] = []

        async def no_sleep(d: float) -> None:
            delays.append(d)

        batcher = AckBatcher(lg, retry_delay=0.5, max_retry_delay=1.0, sleep=no_sleep)
        await batcher.process([RawAck("acks", 0, 0, encode_ack(Ack("m1", "search")))])
        assert delays == [0.5, 1.0, 1.0] and batcher.stats.retries == 3
        assert (await lg.read(ref)).delivered  # type: ignore[union-attr]
        before = await snapshot(lg)
        await batcher.process([RawAck("acks", 0, 0, encode_ack(Ack("m1", "search")))])
        assert await snapshot(lg) == before
    finally:
        await store.close()


def _hub_schema():  # type: ignore[no-untyped-def]
    from framework.core.schema import Column, TableSchema

    return TableSchema("hub", (Column("id", "text"),), (Column("n", "int"),))


def _mutations(event_id: str) -> list[Mutation]:
    return [Upsert("hub", {"id": event_id}, {"n": 1}, 10)]
