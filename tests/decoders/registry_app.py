"""A support-desk agent of ticket changes in a registry format (Avro, JSON Schema or Protobuf), and the
schemas its tests register on the registry stand-in; ``formats_app``: the support desk reading every
registry format and CloudEvents at once, each on its own topic (the worker and backfill tests), its
registry's URL from ``CONVERGE_TEST_REGISTRY``, and ``history``: ticket changes in a format with
their model."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from examples.support_desk.identity import TicketRef
from examples.support_desk.projection import TicketProjection
from examples.support_desk.schemas import TICKET
from framework import App, Event, KeyedAgent, TableSchema, Upsert
from framework.decoders import EventFields, Record, SchemaRegistry
from framework.decoders.base import Decoder
from tests.decoders.support_cdc import TicketPriorityEvents

TOPIC = "helpdesk.ticket-changes"

AVRO_V1: dict[str, Any] = {
    "type": "record", "name": "TicketChanged", "namespace": "helpdesk",
    "fields": [{"name": "event_id", "type": "string"}, {"name": "version", "type": "long"},
               {"name": "subject", "type": "string"}, {"name": "priority", "type": "string"}],
}  # fmt: skip
#: v2 removed ``priority`` (the reader, v1, needs it: no default)
AVRO_V2_REMOVED = {**AVRO_V1, "fields": [f for f in AVRO_V1["fields"] if f["name"] != "priority"]}
#: v3 added ``assignee`` with a default (compatible both ways)
AVRO_V3_ADDED = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "assignee", "type": ["null", "string"],
                                                            "default": None}]}  # fmt: skip
JSON_SCHEMA = json.dumps({
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "required": ["event_id", "version", "subject", "priority"],
    "properties": {"event_id": {"type": "string"}, "version": {"type": "integer", "minimum": 0},
                   "subject": {"type": "string"}, "priority": {"enum": ["low", "normal", "high", "urgent"]}},
})  # fmt: skip
PROTO = """syntax = "proto3";
package helpdesk;
message TicketChanged { string event_id = 1; int64 version = 2; string subject = 3; string priority = 4; }
"""


def proto_class() -> type:
    """The generated class of ``PROTO``'s TicketChanged, built without protoc."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(
        name="helpdesk_ticket.proto", package="helpdesk", syntax="proto3"
    )
    m = fdp.message_type.add(name="TicketChanged")
    F = descriptor_pb2.FieldDescriptorProto  # noqa: N806
    for number, (name, kind) in enumerate(
        [("event_id", F.TYPE_STRING), ("version", F.TYPE_INT64), ("subject", F.TYPE_STRING),
         ("priority", F.TYPE_STRING)], start=1):  # fmt: skip
        m.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("helpdesk.TicketChanged"))


class TicketChanges(KeyedAgent):
    """A ticket's subject and priority at the change's version; the Kafka key is the ticket's."""

    name: ClassVar[str] = "ticket-changes"
    topic: ClassVar[str] = TOPIC
    event_types: ClassVar[tuple[str, ...]] = ("ticket.changed",)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        ref = TicketRef.parse(event.ordering_key)
        cells = {**ref.cells, "subject": event.payload["subject"], "priority": event.payload["priority"]}
        return [Upsert(TICKET.name, ref.key, cells, event.version)]


def app_with(decoder: Decoder) -> App:
    agent = TicketChanges()
    agent.decoder = decoder  # type: ignore[misc]
    return App("support-desk-registry", agents=[agent], projections=[TicketProjection()])


# -- the support desk in every registry format and CloudEvents at once (the worker and backfill tests)

REGISTRY_ENV = "CONVERGE_TEST_REGISTRY"
FORMATS = ("avro", "json_schema", "protobuf", "cloudevents")
FIELDS = EventFields(type="ticket.changed")


def register_all(url: str) -> dict[str, int]:
    """Register the formats' schemas at ``url`` in a fixed order (every stand-in: the same ids)."""
    registry = SchemaRegistry(url)
    return {
        "avro": registry.register("ticket-changes.avro-value", json.dumps(AVRO_V1)),
        "json_schema": registry.register("ticket-changes.json_schema-value", JSON_SCHEMA, "JSON"),
        "protobuf": registry.register("ticket-changes.protobuf-value", PROTO, "PROTOBUF"),
        "avro_removed": registry.register("ticket-changes.avro-value", json.dumps(AVRO_V2_REMOVED)),
    }


def _changes(fmt: str, decoder: Decoder) -> KeyedAgent:
    cls = type(f"TicketChanges_{fmt}", (TicketChanges,), {
        "name": f"ticket-changes-{fmt}", "topic": f"{TOPIC}.{fmt}", "event_types": (), "decoder": decoder,
    })  # fmt: skip
    return cls()


def formats_app() -> App:
    """Ticket changes in Avro, JSON Schema and Protobuf (registry at ``CONVERGE_TEST_REGISTRY``) and
    ticket priorities in CloudEvents, each on its own topic."""
    from framework.decoders.avro import AvroDecoder
    from framework.decoders.json_schema import JsonSchemaDecoder
    from framework.decoders.protobuf import ProtobufDecoder

    registry = SchemaRegistry(os.environ[REGISTRY_ENV])
    agents = [
        _changes("avro", AvroDecoder(registry, FIELDS, reader_schema=AVRO_V1)),
        _changes("json_schema", JsonSchemaDecoder(registry, FIELDS)),
        _changes("protobuf", ProtobufDecoder(registry, PROTO_CLASS, FIELDS)),
        FormatsPriorityEvents(),
    ]
    return App("support-desk-formats", agents=agents, projections=[TicketProjection()])


FORMATS_SPEC = "tests.decoders.registry_app:formats_app"
#: ``formats_app``'s CloudEvents topic (the CDC worker test reads ``support_cdc.TOPIC_CE`` whole)
TOPIC_CE = "helpdesk.ticket-events.formats"


class FormatsPriorityEvents(TicketPriorityEvents):
    name: ClassVar[str] = "ticket-priority-formats"
    topic: ClassVar[str] = TOPIC_CE


def _rfc3339(micros: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)).isoformat()


PROTO_CLASS = proto_class()


def history(fmt: str, ids: Mapping[str, int], seed: int, tickets: int = 5, changes: int = 6) -> tuple[
    list[Record], dict[str, dict[str, Any]]
]:  # fmt: skip
    """Changes of ``tickets`` tickets (tenant ``fmt``) in ``fmt``, in the order made, and the model: each
    ticket's cells after its latest change (by version; the latest time for CloudEvents)."""
    from framework.decoders.avro import avro_payload
    from framework.decoders.protobuf import protobuf_payload
    from framework.decoders.registry import wire

    rng = random.Random(seed)
    out: list[Record] = []
    truth: dict[str, dict[str, Any]] = {}
    for i in range(tickets):
        ref = TicketRef(fmt.replace("_", "-"), "zendesk", str(100 + i))
        key = ref.ordering_key.encode()
        versions = rng.sample(range(1_700_000_000_000_000, 1_700_000_000_000_000 + 10**9), changes)
        latest: dict[str, Any] = {}
        for n, version in enumerate(versions):
            change = {"event_id": f"{fmt}-{i}-{n}", "version": version, "subject": f"s{i}.{n}",
                      "priority": rng.choice(["low", "normal", "high", "urgent"])}  # fmt: skip
            if version == max(versions):
                latest = {"priority": change["priority"]}
                if fmt != "cloudevents":
                    latest["subject"] = change["subject"]
            if fmt == "avro":
                value = avro_payload(AVRO_V1, change, ids["avro"])
            elif fmt == "json_schema":
                value = wire(ids["json_schema"], json.dumps(change).encode())
            elif fmt == "protobuf":
                value = protobuf_payload(PROTO_CLASS(**change), ids["protobuf"])
            if fmt != "cloudevents":
                out.append(Record(key, value, f"{TOPIC}.{fmt}", 0, len(out)))
                continue
            attrs: dict[str, str] = {"specversion": "1.0", "id": str(change["event_id"]),
                                     "source": "/helpdesk", "type": "ticket.prioritized",
                                     "time": _rfc3339(version)}  # fmt: skip
            data = {"priority": change["priority"]}
            if n % 2:  # binary mode
                headers = (
                    *((f"ce_{k}", v.encode()) for k, v in attrs.items()),
                    ("content-type", b"application/json"),
                )
                out.append(Record(key, json.dumps(data).encode(), TOPIC_CE, 0, len(out), None, headers))
            else:
                value = json.dumps({**attrs, "data": data}).encode()
                out.append(Record(key, value, TOPIC_CE, 0, len(out), None,
                                  (("content-type", b"application/cloudevents+json"),)))  # fmt: skip
        truth[ref.ticket_id] = {**ref.cells, **latest}
    return out, truth


def poison(ids: Mapping[str, int]) -> list[tuple[Record, tuple[str, str]]]:
    """Poison of every format of ``formats_app`` and the (stage, error class) each is parked with."""
    from framework.decoders.avro import avro_payload
    from framework.decoders.registry import wire

    key = b"avro/zendesk/999"
    change = {"event_id": "p1", "version": 1_700_000_000_000_000, "subject": "s", "priority": "low"}
    good = avro_payload(AVRO_V1, change, ids["avro"])
    removed = avro_payload(
        AVRO_V2_REMOVED, {k: v for k, v in change.items() if k != "priority"}, ids["avro_removed"]
    )
    bad, unknown = ("parse", "DecodeError"), ("parse", "UnknownSchema")
    no_time = {"specversion": "1.0", "id": "p2", "source": "/helpdesk", "type": "ticket.prioritized",
               "data": {"priority": "low"}}  # fmt: skip
    return [
        (Record(key, b"\x07" + good[1:], f"{TOPIC}.avro"), bad),  # wrong magic byte
        (Record(key, good[:-2], f"{TOPIC}.avro"), bad),  # truncated Avro
        (Record(key, removed, f"{TOPIC}.avro"), bad),  # an evolved schema that removed a field
        (Record(key, wire(55_555, b"{}"), f"{TOPIC}.json_schema"), unknown),  # unknown schema id
        (Record(key, wire(ids["protobuf"], b"\x00\xff\xff"), f"{TOPIC}.protobuf"), bad),
        (Record(b"ce/zendesk/999", json.dumps(no_time).encode(), TOPIC_CE), bad),  # no version
    ]
