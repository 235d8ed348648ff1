"""CloudEvents in structured and binary mode decode to the same event; poison is parked at parse."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import ClassVar

import pytest

from examples.support_desk.identity import TicketRef
from examples.support_desk.schemas import TICKET
from framework import App, Event, KeyedAgent, TableSchema, Upsert
from framework.decoders import DecodeError, Record
from framework.decoders.cloudevents import STRUCTURED, CloudEventsDecoder
from framework.testing import Driver

TOPIC = "helpdesk.cloudevents"
KEY = b"t1/zendesk/42"
ATTRS = {
    "specversion": "1.0",
    "id": "evt-1",
    "source": "/helpdesk/t1",
    "type": "ticket.prioritized",
    "time": "2026-03-01T10:00:00.123456789Z",
    "subject": "42",
    "partitionkey": "t1/zendesk/42",
}
DATA = {"priority": "urgent"}


def structured(attrs: Mapping[str, object] = ATTRS, data: object = DATA, key: bytes | None = KEY) -> Record:
    value = json.dumps({**attrs, "datacontenttype": "application/json", "data": data}).encode()
    return Record(key, value, TOPIC, headers=(("content-type", STRUCTURED.encode() + b"; charset=utf-8"),))


def binary(attrs: Mapping[str, object] = ATTRS, data: bytes = json.dumps(DATA).encode(),
           key: bytes | None = KEY, content_type: bytes = b"application/json") -> Record:  # fmt: skip
    headers = tuple((f"ce_{k}", str(v).encode()) for k, v in attrs.items())
    return Record(key, data, TOPIC, headers=(*headers, ("content-type", content_type)))


class Prioritized(KeyedAgent):
    name: ClassVar[str] = "prioritized"
    topic: ClassVar[str] = TOPIC
    event_types: ClassVar[tuple[str, ...]] = ("ticket.prioritized",)
    tables: ClassVar[tuple[TableSchema, ...]] = (TICKET,)
    decoder = CloudEventsDecoder()

    def handle(self, event: Event) -> Iterable[Upsert]:
        ref = TicketRef.parse(event.ordering_key)
        return [
            Upsert(
                TICKET.name,
                ref.key,
                {**ref.cells, "priority": event.payload["data"]["priority"]},
                event.version,
            )
        ]


def test_structured_and_binary_mode_give_the_same_event() -> None:
    decoder = CloudEventsDecoder()
    s, b = decoder.decode(structured()), decoder.decode(binary())
    assert (
        s.event_id == b.event_id == "evt-1@/helpdesk/t1"
        and s.ordering_key == b.ordering_key == "t1/zendesk/42"
    )
    assert s.version == b.version == 1_772_359_200_123_456 and s.type == "ticket.prioritized"
    assert s.payload["data"] == b.payload["data"] == DATA
    assert s.payload["attributes"]["subject"] == b.payload["attributes"]["subject"] == "42"
    assert decoder.decode(structured(key=None)).ordering_key == "t1/zendesk/42"  # the partitionkey
    opaque = decoder.decode(binary(data=b"\x00\xff", content_type=b"application/octet-stream"))
    assert opaque.payload["data"] == {"data_base64": "AP8="}
    versioned = CloudEventsDecoder(version_attribute="modifiedus").decode(binary({**ATTRS, "modifiedus": 77}))
    assert versioned.version == 77 and versioned.occurred_at == s.version


NO_TIME = {k: v for k, v in ATTRS.items() if k != "time"}
NO_ID = {k: v for k, v in ATTRS.items() if k != "id"}
POISON = [
    structured(NO_TIME),  # no version
    structured(NO_ID),  # a required attribute missing
    structured({**ATTRS, "specversion": "0.3"}),
    structured({**ATTRS, "time": "yesterday"}),
    binary(data=b"{broken", content_type=b"application/json"),
    Record(KEY, b"[1, 2]", TOPIC, headers=(("content-type", STRUCTURED.encode()),)),
    structured({k: v for k, v in ATTRS.items() if k != "partitionkey"}, key=None),  # no ordering key
]


def test_poison_is_parked_at_parse() -> None:
    app = App("cloudevents", agents=[Prioritized()])
    with Driver(app) as d:
        assert d.send([structured(), binary({**ATTRS, "id": "evt-2"})]) == []
        parked = d.send(POISON)
        assert [(p.stage, type(p.error).__name__) for p in parked] == [("parse", "DecodeError")] * len(POISON)
        [row] = d.rows("ticket")
        assert row.cells["priority"].value == "urgent"
    with pytest.raises(DecodeError, match="time: missing"):
        CloudEventsDecoder().decode(binary(NO_TIME))
