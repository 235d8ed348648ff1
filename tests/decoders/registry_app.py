"""A support-desk agent of ticket changes in a registry format (Avro, JSON Schema or Protobuf), and the
schemas its tests register on the registry stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from examples.support_desk.identity import TicketRef
from examples.support_desk.projection import TicketProjection
from examples.support_desk.schemas import TICKET
from framework import App, Event, KeyedAgent, TableSchema, Upsert
from framework.decoders.base import Decoder

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
