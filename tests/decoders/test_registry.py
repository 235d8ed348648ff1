"""Registry wire formats (Avro, JSON Schema, Protobuf) against the registry stand-in: decoded in the
test kit, each schema fetched once; poison (wrong magic byte, unknown schema id, truncated payload,
an evolved schema with a removed field, an invalid document) parked at ``parse`` with its class; a
registry that does not answer is a transient failure, never a parked record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from framework.decoders import Record
from framework.decoders.avro import AvroDecoder, avro_payload
from framework.decoders.fields import EventFields
from framework.decoders.json_schema import JsonSchemaDecoder
from framework.decoders.protobuf import ProtobufDecoder, protobuf_payload
from framework.decoders.registry import RegistryUnavailable, SchemaRegistry, UnknownSchema, split_wire, wire
from framework.decoders.registry_server import RegistryStandIn
from framework.runtime.errors import SinkFailure
from framework.testing import Driver
from tests.decoders.registry_app import (
    AVRO_V1,
    AVRO_V2_REMOVED,
    AVRO_V3_ADDED,
    JSON_SCHEMA,
    PROTO,
    TOPIC,
    app_with,
    proto_class,
)

FIELDS = EventFields(type="ticket.changed")
KEY = b"t1/zendesk/42"


@pytest.fixture(scope="module")
def stand_in() -> Iterator[RegistryStandIn]:
    with RegistryStandIn() as server:
        yield server


def _rec(value: bytes | None, key: bytes | None = KEY, offset: int = 0) -> Record:
    return Record(key, value, TOPIC, 0, offset)


def _change(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"e{n}",
        "version": 1_700_000_000_000_000 + n,
        "subject": f"s{n}",
        "priority": "high",
        **extra,
    }


def _cells(driver: Driver) -> list[dict[str, Any]]:
    return [{c: cell.value for c, cell in r.cells.items()} for r in driver.rows("ticket")]


def _parked(driver: Driver, records: list[Record]) -> list[tuple[str, str]]:
    return [(p.stage, type(p.error).__name__) for p in driver.send(records)]


def test_the_wire_format_frame() -> None:
    assert split_wire(wire(7, b"abc")) == (7, b"abc")
    assert wire(258, b"")[:5] == b"\x00\x00\x00\x01\x02"


def test_avro_decodes_fetches_each_schema_once_and_parks_poison(stand_in: RegistryStandIn) -> None:
    v1 = stand_in.register("avro-tickets-value", json.dumps(AVRO_V1))
    v2 = stand_in.register("avro-tickets-value", json.dumps(AVRO_V2_REMOVED))
    v3 = stand_in.register("avro-tickets-value", json.dumps(AVRO_V3_ADDED))
    registry = SchemaRegistry(stand_in.url)
    decoder = AvroDecoder(registry, FIELDS, reader_schema=AVRO_V1)
    good = [_rec(avro_payload(AVRO_V1, _change(n), v1), offset=n) for n in range(1, 6)]
    good.append(
        _rec(avro_payload(AVRO_V3_ADDED, _change(9, assignee="ann"), v3), offset=9)
    )  # evolved, compatible
    full = avro_payload(AVRO_V1, _change(7), v1)
    poison = [
        _rec(b"\x01" + full[1:]),  # wrong magic byte
        _rec(b"\x00\x00"),  # shorter than the header
        _rec(wire(999_999, full[5:])),  # unknown schema id
        _rec(full[:-3]),  # truncated Avro
        _rec(avro_payload(AVRO_V2_REMOVED, {k: v for k, v in _change(8).items() if k != "priority"}, v2)),
        _rec(None),  # a tombstone: no schema id
    ]
    with Driver(app_with(decoder)) as d:
        assert d.send(good) == []
        assert _parked(d, poison) == [
            ("parse", "DecodeError"), ("parse", "DecodeError"), ("parse", "UnknownSchema"),
            ("parse", "DecodeError"), ("parse", "DecodeError"), ("parse", "DecodeError"),
        ]  # fmt: skip
        assert _cells(d)[0]["subject"] == "s9" and _cells(d)[0]["priority"] == "high"
        assert d.send(good) == []  # again: nothing fetched again
    assert stand_in.hits[v1] == 1 and stand_in.hits[v3] == 1 and registry.fetches == 3


def test_avro_without_a_reader_schema_parks_a_record_missing_the_version(stand_in: RegistryStandIn) -> None:
    no_version = {
        **AVRO_V1,
        "name": "NoVersion",
        "fields": [f for f in AVRO_V1["fields"] if f["name"] != "version"],
    }
    sid = stand_in.register("avro-bare-value", json.dumps(no_version))
    decoder = AvroDecoder(SchemaRegistry(stand_in.url), FIELDS)
    with Driver(app_with(decoder)) as d:
        value = {k: v for k, v in _change(1).items() if k != "version"}
        [parked] = d.send(_rec(avro_payload(no_version, value, sid)))
        assert (parked.stage, type(parked.error).__name__) == ("parse", "DecodeError")
        assert "version" in str(parked.error)


def test_json_schema_validates_and_parks_invalid_documents(stand_in: RegistryStandIn) -> None:
    sid = stand_in.register("json-tickets-value", JSON_SCHEMA, "JSON")
    avro_id = stand_in.register("avro-tickets-value", json.dumps(AVRO_V1))
    decoder = JsonSchemaDecoder(SchemaRegistry(stand_in.url), FIELDS)
    good = _rec(wire(sid, json.dumps(_change(1)).encode()))
    poison = [
        _rec(wire(sid, json.dumps(_change(2, priority="whenever")).encode())),  # not in the enum
        _rec(wire(sid, b"{not json")),
        _rec(wire(avro_id, json.dumps(_change(3)).encode())),  # an Avro schema's id
        _rec(wire(424_242, json.dumps(_change(4)).encode())),  # unknown schema id
    ]
    with Driver(app_with(decoder)) as d:
        assert d.send(good) == []
        assert _parked(d, poison) == [("parse", "DecodeError"), ("parse", "DecodeError"),
                                      ("parse", "UnknownSchema"), ("parse", "UnknownSchema")]  # fmt: skip
        assert _cells(d)[0]["subject"] == "s1"


def test_protobuf_decodes_and_parks_poison(stand_in: RegistryStandIn) -> None:
    cls = proto_class()
    sid = stand_in.register("proto-tickets-value", PROTO, "PROTOBUF")
    decoder = ProtobufDecoder(SchemaRegistry(stand_in.url), cls, FIELDS)
    message = cls(**_change(1))
    good = protobuf_payload(message, sid)
    poison = [
        _rec(protobuf_payload(message, sid)[:-4]),  # truncated
        _rec(protobuf_payload(message, sid, indexes=(1, 0))),  # another message of the file
        _rec(wire(31_337, good[5:])),  # unknown schema id
    ]
    with Driver(app_with(decoder)) as d:
        assert d.send(_rec(good)) == []
        assert _parked(d, poison) == [
            ("parse", "DecodeError"),
            ("parse", "DecodeError"),
            ("parse", "UnknownSchema"),
        ]
        assert _cells(d)[0]["subject"] == "s1"
    event = decoder.decode(_rec(good))
    assert (
        event.version == 1_700_000_000_000_001
        and event.event_id == "e1"
        and event.ordering_key == "t1/zendesk/42"
    )


def test_a_registry_that_does_not_answer_is_transient_not_poison() -> None:
    with RegistryStandIn() as gone:
        url = gone.url
    decoder = AvroDecoder(SchemaRegistry(url, timeout=1.0), FIELDS, reader_schema=AVRO_V1)
    with pytest.raises(RegistryUnavailable):
        decoder.decode(_rec(avro_payload(AVRO_V1, _change(1), 1)))
    with Driver(app_with(decoder)) as d, pytest.raises(SinkFailure, match="decoder:avro"):
        d.send(_rec(avro_payload(AVRO_V1, _change(1), 1)))
    assert issubclass(UnknownSchema, Exception)


class _Recording:
    """A batch sink that records what it is asked to write."""

    name = "recording"

    def __init__(self) -> None:
        self.batches: list[Any] = []

    async def write(self, event: Any, mutations: Any) -> None:
        self.batches.append([(event, mutations)])

    async def write_batch(self, batch: Any) -> None:
        self.batches.append(list(batch))


def test_the_worker_batch_path_hands_a_registry_outage_to_the_per_key_path() -> None:
    import asyncio

    from framework.runtime.processor import AgentProcessor
    from framework.runtime.work import Work

    with RegistryStandIn() as gone:
        url = gone.url
    agent = app_with(AvroDecoder(SchemaRegistry(url, timeout=1.0), FIELDS)).agents[0]
    sink = _Recording()
    processor = AgentProcessor(agent, [sink])
    works = [Work((TOPIC, 0), i, KEY, avro_payload(AVRO_V1, _change(i), 1)) for i in range(3)]
    for w in works:
        processor.prepare(w)  # no raise: the record waits for its turn
        assert w.event is None and w.decoder is agent.decoder
    items, bad = processor.map_batch(works)
    assert bad == []
    with pytest.raises(SinkFailure, match="decoder:avro"):
        asyncio.run(processor.write_batch(items))
    assert sink.batches == []  # nothing written: the per-key path retries each record
    with pytest.raises(SinkFailure):
        asyncio.run(processor(works[0]))


def test_debezium_changes_in_avro_through_the_cdc_decoder(stand_in: RegistryStandIn) -> None:
    from framework.decoders import CdcDecoder

    row = {"type": "record", "name": "Value", "namespace": "helpdesk.public.tickets",
           "fields": [{"name": "id", "type": "long"}, {"name": "subject", "type": "string"}]}  # fmt: skip
    key_schema = {"type": "record", "name": "Key", "namespace": "helpdesk.public.tickets",
                  "fields": [{"name": "id", "type": "long"}]}  # fmt: skip
    envelope = {"type": "record", "name": "Envelope", "namespace": "helpdesk.public.tickets", "fields": [
        {"name": "before", "type": ["null", row], "default": None},
        {"name": "after", "type": ["null", "helpdesk.public.tickets.Value"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "ts_ms", "type": "long"}, {"name": "lsn", "type": ["null", "long"]},
            {"name": "table", "type": "string"}]}}]}  # fmt: skip
    kid = stand_in.register("tickets-key", json.dumps(key_schema))
    vid = stand_in.register("tickets-value", json.dumps(envelope))
    avro = AvroDecoder(SchemaRegistry(stand_in.url))
    decoder = CdcDecoder("ticket", read_value=avro.read, read_key=avro.read_key)
    source = {"ts_ms": 1_700_000_000_123, "lsn": 77, "table": "tickets"}
    change = {"before": None, "after": {"id": 5, "subject": "printer"}, "op": "c", "source": source}
    record = Record(avro_payload(key_schema, {"id": 5}, kid), avro_payload(envelope, change, vid), "cdc")
    event = decoder.decode(record)
    assert (event.type, event.ordering_key, event.version) == ("ticket.insert", "5", 1_700_000_000_123_000)
    assert event.payload["after"] == {"id": 5, "subject": "printer"}
    tombstone = decoder.decode(Record(record.key, None, "cdc"))
    assert tombstone.type == "ticket.tombstone" and tombstone.ordering_key == "5"
    with pytest.raises(Exception, match="magic"):
        decoder.decode(Record(b'{"id": 5}', record.value, "cdc"))  # a JSON key where Avro is expected
