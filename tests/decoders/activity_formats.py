"""The activity platform plugged onto topics in each source format, and its histories in them.

The reference agents (``agents``: activities, engagement, insights) read each format through the
format's built-in decoder, on topics of their own (``activity-events.avro``, ...); a thin agent
per topic hands the decoded event's payload to the reference agent's ``handle`` in the envelope's
shape, the mapping of the app onto its source format:

- ``avro``, ``json_schema``, ``protobuf`` (schema-registry wire format): one ``ActivityEvent``
  record per event, its id, version, time and type as fields (Avro's as ``timestamp-micros``),
  its payload a map of typed values (Avro: a map of a union; JSON Schema: an object; Protobuf:
  a map of a ``oneof`` value), which keeps a field set to null apart from an absent one;
- ``cloudevents``: the payload as ``data``, ``time`` the occurrence, the version in the
  ``sourceversion`` extension; every other event in binary mode (``ce_*`` headers);
- ``cdc``: the CRM's ``activities`` table, whose rows are the hub cells the activity events
  write, captured Debezium-style (``cdc_records``); engagement and insights stay on their envelope
  topics. A change commits at its event's version: ``ts_ms`` its millisecond and
  ``transaction.total_order`` the microseconds past it, so the CDC version rule gives the same
  version the envelope event has (mixed with the envelope topics' versions, ties included).

The registry's URL comes from ``CONVERGE_TEST_REGISTRY`` when an app is built (``format_app``,
``all_formats``: factories, as the worker and Spark load them by ``MODULE:ATTR``); ``register``
registers the schemas in a fixed order, so every stand-in gives them the same ids.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from agents import ActivitiesAgent, ActivityProjection, EngagementAgent, InsightsAgent
from agents.event_types import SPECS, TOPIC_ACTIVITIES, topic_of
from agents.identity import ActivityRef
from agents.schemas import ACTIVITY_HUB, OWNER_ACTIVITY
from examples.activity_platform.generator import generate_history
from examples.activity_platform.history import History
from framework import App, Delete, Event, KeyedAgent, Upsert
from framework.core.mutations import Mutation
from framework.decoders import CdcDecoder, EventFields, Record, SchemaRegistry
from framework.decoders.base import Decoder
from framework.decoders.cloudevents import STRUCTURED, CloudEventsDecoder

FORMATS = ("avro", "json_schema", "protobuf", "cloudevents", "cdc")
REGISTRY_ENV = "CONVERGE_TEST_REGISTRY"
CE_SOURCE = "/activity-platform"
FIELDS = EventFields(
    version_field="version", time_field="occurred_at", id_field="event_id", type_field="type"
)
BASES: tuple[type[KeyedAgent], ...] = (ActivitiesAgent, EngagementAgent, InsightsAgent)

_MICROS = {"type": "long", "logicalType": "timestamp-micros"}
AVRO: dict[str, Any] = {
    "type": "record", "name": "ActivityEvent", "namespace": "activity",
    "fields": [
        {"name": "event_id", "type": "string"}, {"name": "version", "type": _MICROS},
        {"name": "occurred_at", "type": _MICROS}, {"name": "type", "type": "string"},
        {"name": "payload", "type": {"type": "map", "values": [
            "null", "boolean", "long", "double", "string", {"type": "array", "items": "string"}]}},
    ],
}  # fmt: skip
#: an evolution that removed ``occurred_at`` (the reader, ``AVRO``, needs it: no default)
AVRO_REMOVED = {**AVRO, "fields": [f for f in AVRO["fields"] if f["name"] != "occurred_at"]}
JSON_SCHEMA = json.dumps({
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "required": ["event_id", "version", "occurred_at", "type", "payload"],
    "properties": {
        "event_id": {"type": "string"}, "version": {"type": "integer", "minimum": 0},
        "occurred_at": {"type": "integer", "minimum": 0}, "type": {"enum": sorted(SPECS)},
        "payload": {"type": "object", "additionalProperties": {
            "type": ["null", "boolean", "integer", "number", "string", "array"],
            "items": {"type": "string"}}},
    },
})  # fmt: skip
PROTO = """syntax = "proto3";
package activity;
message Texts { repeated string items = 1; }
message Value {
  oneof kind { string text = 1; sint64 integer = 2; double number = 3; Texts texts = 4; bool null = 5; }
}
message ActivityEvent {
  string event_id = 1; int64 version = 2; int64 occurred_at = 3; string type = 4;
  map<string, Value> payload = 5;
}
"""


def register(url: str) -> dict[str, int]:
    """Register the formats' schemas (and the evolved Avro one) at ``url``, in a fixed order; their ids."""
    registry = SchemaRegistry(url)
    return {
        "avro": registry.register("activity-events.avro-value", json.dumps(AVRO)),
        "json_schema": registry.register("activity-events.json_schema-value", JSON_SCHEMA, "JSON"),
        "protobuf": registry.register("activity-events.protobuf-value", PROTO, "PROTOBUF"),
        "avro_removed": registry.register("activity-events.avro-value", json.dumps(AVRO_REMOVED)),
    }


def proto_classes() -> dict[str, type]:
    """The generated classes of ``PROTO`` (``Texts``, ``Value``, ``ActivityEvent``), built without protoc."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto  # noqa: N806
    fdp = descriptor_pb2.FileDescriptorProto(name="activity_event.proto", package="activity", syntax="proto3")
    texts = fdp.message_type.add(name="Texts")
    texts.field.add(name="items", number=1, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    value = fdp.message_type.add(name="Value")
    value.oneof_decl.add(name="kind")
    for number, (name, kind, type_name) in enumerate(
        [("text", F.TYPE_STRING, None), ("integer", F.TYPE_SINT64, None), ("number", F.TYPE_DOUBLE, None),
         ("texts", F.TYPE_MESSAGE, ".activity.Texts"), ("null", F.TYPE_BOOL, None)], start=1):  # fmt: skip
        f = value.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL, oneof_index=0)
        if type_name:
            f.type_name = type_name
    event = fdp.message_type.add(name="ActivityEvent")
    for number, (name, kind) in enumerate(
        [("event_id", F.TYPE_STRING), ("version", F.TYPE_INT64), ("occurred_at", F.TYPE_INT64),
         ("type", F.TYPE_STRING)], start=1):  # fmt: skip
        event.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    entry = event.nested_type.add(name="PayloadEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".activity.Value")  # fmt: skip
    event.field.add(name="payload", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                    type_name=".activity.ActivityEvent.PayloadEntry")  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"activity.{n}"))
            for n in ("Texts", "Value", "ActivityEvent")}  # fmt: skip


PROTO_CLASSES = proto_classes()


# -- the payload in the envelope's shape, from each format's decoded event -------------------------


def _from_registry(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(payload["payload"])


def _proto_value(value: Mapping[str, Any]) -> Any:
    [(kind, v)] = value.items()
    if kind == "null":
        return None
    return list(v["items"]) if kind == "texts" else v


def _from_protobuf(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    return {name: _proto_value(v) for name, v in payload["payload"].items()}


def _from_cloudevents(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(payload["data"])


def decoded_agent(base: type[KeyedAgent], fmt: str, decoder: Decoder,
                  payload: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> KeyedAgent:  # fmt: skip
    """``base``'s mapping on ``<base.topic>.<fmt>``, read by ``decoder``; ``payload`` turns the decoded
    payload into the envelope's. Routed by topic (no event types of its own: the envelope agents'
    types stay theirs)."""
    inner = base()

    def handle(self: KeyedAgent, event: Event) -> Iterable[Mutation]:
        return inner.handle(dataclasses.replace(event, payload=payload(event.payload)))

    cls = type(f"{base.__name__}_{fmt}", (KeyedAgent,), {
        "name": f"{base.name}-{fmt}", "topic": f"{base.topic}.{fmt}", "tables": base.tables,
        "event_types": (), "decoder": decoder, "handle": handle,
    })  # fmt: skip
    return cls()


KEY_COLUMNS = ("org_id", "source", "external_id")


def _ref(key: Mapping[str, Any]) -> ActivityRef:
    return ActivityRef(str(key["org_id"]), str(key["source"]), str(key["external_id"]))


CDC = CdcDecoder("activity", key_columns=KEY_COLUMNS, ordering_key=lambda k: _ref(k).ordering_key)


class ActivityCdcAgent(KeyedAgent):
    """The CRM's ``activities`` table (CDC): an image upserts the row's hub cells, a delete removes the
    hub row (a cancellation), an insert of a row with an owner writes its ``owner_activity`` row."""

    name: ClassVar[str] = "activities-cdc"
    topic: ClassVar[str] = f"{TOPIC_ACTIVITIES}.cdc"
    tables = ActivitiesAgent.tables
    decoder = CDC

    def handle(self, event: Event) -> Iterable[Mutation]:
        ref = _ref(event.payload["key"])
        kind = event.type.split(".", 1)[1]
        if kind == "tombstone":
            return []
        key = {"hub_id": ref.hub_id}
        if kind == "delete":
            return [Delete(ACTIVITY_HUB.name, key, event.version)]
        row = dict(event.payload["after"])
        owner, created_at = row.pop("owner_id", None), row.pop("owner_created_at", None)
        out: list[Mutation] = [Upsert(ACTIVITY_HUB.name, key, row, event.version)]
        if kind == "insert" and owner is not None:
            owned = {"org_id": ref.org_id, "owner_id": owner, "hub_id": ref.hub_id}
            out.append(Upsert(OWNER_ACTIVITY.name, owned, {"kind": row["kind"], "created_at": created_at},
                              event.version))  # fmt: skip
        return out


def _decoders(url: str) -> dict[str, tuple[Decoder, Callable[[Mapping[str, Any]], Mapping[str, Any]]]]:
    from framework.decoders.avro import AvroDecoder
    from framework.decoders.json_schema import JsonSchemaDecoder
    from framework.decoders.protobuf import ProtobufDecoder

    registry = SchemaRegistry(url)
    return {
        "avro": (AvroDecoder(registry, FIELDS, reader_schema=AVRO), _from_registry),
        "json_schema": (JsonSchemaDecoder(registry, FIELDS), _from_registry),
        "protobuf": (ProtobufDecoder(registry, PROTO_CLASSES["ActivityEvent"], FIELDS), _from_protobuf),
        "cloudevents": (CloudEventsDecoder(version_attribute="sourceversion"), _from_cloudevents),
    }


def _agents(fmt: str, url: str | None) -> list[KeyedAgent]:
    if fmt == "cdc":
        return [ActivityCdcAgent(), EngagementAgent(), InsightsAgent()]
    if fmt == "envelope":
        return [cls() for cls in BASES]
    decoder, payload = _decoders(url or os.environ[REGISTRY_ENV])[fmt]
    return [decoded_agent(base, fmt, decoder, payload) for base in BASES]


def format_app(fmt: str, url: str | None = None) -> App:
    """The activity platform (its three agents and projection; no aggregates, retention, ID
    mutation) reading ``fmt`` (``envelope``: the reference agents)."""
    return App(f"activity-{fmt}", agents=_agents(fmt, url), projections=[ActivityProjection()])


def all_formats() -> App:
    """Every format in one app, each on its own topics (a history per format, disjoint
    activities): the worker's and the backfill's app. The CDC history's engagement and insights
    are on the envelope topics."""
    url = os.environ[REGISTRY_ENV]
    agents = [a for fmt in FORMATS for a in _agents(fmt, url)]
    return App("activity-formats", agents=agents, projections=[ActivityProjection()])


ALL_SPEC = "tests.decoders.activity_formats:all_formats"


# -- a history in each format ----------------------------------------------------------------------


def _rfc3339(micros: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)).isoformat()


def _proto_payload(payload: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, v in payload.items():
        if v is None:
            out[name] = {"null": True}
        elif isinstance(v, str):
            out[name] = {"text": v}
        elif isinstance(v, bool):
            raise TypeError(f"no boolean payload fields: {name}")
        elif isinstance(v, int):
            out[name] = {"integer": v}
        elif isinstance(v, float):
            out[name] = {"number": v}
        else:
            out[name] = {"texts": {"items": list(v)}}
    return out


def encode(event: Event, fmt: str, ids: Mapping[str, int], offset: int = 0) -> Record:
    """``event`` as a producer of ``fmt`` writes it on its topic (``ids``: ``register``'s)."""
    from framework.decoders.avro import avro_payload
    from framework.decoders.protobuf import protobuf_payload
    from framework.decoders.registry import wire

    topic = f"{topic_of(event.type)}.{fmt}"
    key = event.ordering_key.encode()
    header = {"event_id": event.event_id, "version": event.version, "occurred_at": event.occurred_at,
              "type": event.type}  # fmt: skip
    payload = dict(event.payload)
    if fmt == "avro":
        value = avro_payload(AVRO, {**header, "payload": payload}, ids["avro"])
    elif fmt == "json_schema":
        value = wire(ids["json_schema"], json.dumps({**header, "payload": payload}).encode())
    elif fmt == "protobuf":
        message = PROTO_CLASSES["ActivityEvent"](**header, payload=_proto_payload(payload))
        value = protobuf_payload(message, ids["protobuf"])
    elif fmt == "cloudevents":
        attrs = {"specversion": "1.0", "id": event.event_id, "source": CE_SOURCE, "type": event.type,
                 "time": _rfc3339(event.occurred_at), "sourceversion": str(event.version)}  # fmt: skip
        if int(event.event_id.replace("-", "")[-1], 16) % 2:  # binary mode
            headers = (
                *((f"ce_{k}", v.encode()) for k, v in attrs.items()),
                ("content-type", b"application/json"),
            )
            return Record(key, json.dumps(payload).encode(), topic, 0, offset, None, headers)
        value = json.dumps({**attrs, "datacontenttype": "application/json", "data": payload}).encode()
        return Record(key, value, topic, 0, offset, None, (("content-type", STRUCTURED.encode()),))
    else:
        raise ValueError(f"no encoding {fmt!r}")
    return Record(key, value, topic, 0, offset)


def envelope_record(event: Event, offset: int = 0) -> Record:
    """``event`` in converge's envelope on its reference topic."""
    return Record(event.ordering_key.encode(), event.to_json(), topic_of(event.type), 0, offset)


def cdc_records(history: History) -> list[Record]:
    """The CRM's ``activities`` table's change events for the history's activity events, in commit
    (version) order, with a tombstone after each delete (see the module doc)."""
    events = sorted((e for e in history.distinct() if topic_of(e.type) == TOPIC_ACTIVITIES),
                    key=lambda e: (e.version, e.event_id))  # fmt: skip
    inner = ActivitiesAgent()
    table: dict[tuple[str, ...], dict[str, Any]] = {}
    out: list[Record] = []
    lsn = 5000
    for e in events:
        ident = tuple(str(e.payload[c]) for c in KEY_COLUMNS)
        key = json.dumps(dict(zip(KEY_COLUMNS, ident, strict=True))).encode()
        before = table.get(ident)
        lsn += 7
        if e.type == "meeting.cancelled":
            op, after = "d", None
            table.pop(ident, None)
        else:
            hub = next(m for m in inner.handle(e) if isinstance(m, Upsert) and m.table == ACTIVITY_HUB.name)
            after = {**(before or {}), **hub.cells}
            if e.type.endswith(".created") and "owner_id" in e.payload:
                after.update(owner_id=e.payload["owner_id"], owner_created_at=e.occurred_at)
            op = "c" if before is None else "u"
            table[ident] = after
        value = {
            "before": before, "after": after, "op": op, "ts_ms": e.version // 1000 + 3,
            "source": {"connector": "postgresql", "name": "crm", "db": "crm", "schema": "public",
                       "table": "activities", "ts_ms": e.version // 1000, "lsn": lsn},
            "transaction": {"id": f"tx{lsn}", "total_order": e.version % 1000},
        }  # fmt: skip
        out.append(Record(key, json.dumps(value).encode(), ActivityCdcAgent.topic, 0, len(out)))
        if op == "d":
            out.append(Record(key, None, ActivityCdcAgent.topic, 0, len(out)))
    return out


def records(history: History, fmt: str, ids: Mapping[str, int]) -> list[Record]:
    """The history in ``fmt``: every delivery of its arrival order (duplicates and replays too), but
    for CDC: the table's change log, and the engagement and insight events in the envelope."""
    if fmt == "cdc":
        rest = [
            envelope_record(e, i)
            for i, e in enumerate(history.events)
            if topic_of(e.type) != TOPIC_ACTIVITIES
        ]
        return [*cdc_records(history), *rest]
    return [encode(e, fmt, ids, i) for i, e in enumerate(history.events)]


def by_topic(items: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in items:
        out.setdefault(r.topic, []).append(r)
    return out


def poison_of(fmt: str, ids: Mapping[str, int]) -> list[tuple[Record, tuple[str, str]]]:
    """Poison records of ``fmt`` and the (stage, error class) each is parked with: a wrong magic
    byte, an unknown schema id, a truncated payload, an Avro schema evolved with a removed field, a
    CDC record without a log position, a CloudEvent without its version, ..."""
    from framework.decoders.avro import avro_payload
    from framework.decoders.registry import wire

    h = generate_history(3, n_events=12, n_orgs=1)
    email = next(e for e in h.events if e.type == "email.created")
    good = encode(email, fmt if fmt != "cdc" else "avro", ids)
    key = good.key

    def rec(value: bytes | None, **kw: Any) -> Record:
        return Record(kw.get("key", key), value, good.topic, headers=kw.get("headers", good.headers))

    bad_decode, unknown = ("parse", "DecodeError"), ("parse", "UnknownSchema")
    if fmt in ("avro", "json_schema", "protobuf"):
        value = good.value or b""
        out = [
            (rec(b"\x01" + value[1:]), bad_decode),  # wrong magic byte
            (rec(wire(987_654, value[5:])), unknown),  # unknown schema id
            (rec(value[:-4]), bad_decode),  # truncated
        ]
        if fmt == "avro":
            header = {"event_id": "x1", "version": email.version, "type": email.type,
                      "payload": dict(email.payload)}  # fmt: skip
            out.append((rec(avro_payload(AVRO_REMOVED, header, ids["avro_removed"])), bad_decode))
            unknown_field = {**header, "occurred_at": 1, "payload": {**email.payload, "colour": "red"}}
            out.append((rec(avro_payload(AVRO, unknown_field, ids["avro"])), ("map", "PayloadError")))
        if fmt == "json_schema":
            doc = {"event_id": "x2", "version": -1, "occurred_at": 1, "type": email.type, "payload": {}}
            out.append((rec(wire(ids["json_schema"], json.dumps(doc).encode())), bad_decode))
        if fmt == "protobuf":
            out[2] = (rec(value[:7]), bad_decode)  # cut inside a field
            out.append((rec(wire(ids["protobuf"], b"\x02\x02" + value[6:])), bad_decode))  # indexes [1]
        return out
    if fmt == "cloudevents":
        if any(k.startswith("ce_") for k, _ in good.headers):  # binary mode: drop the version header
            no_version = rec(
                good.value, headers=tuple((k, v) for k, v in good.headers if k != "ce_sourceversion")
            )
        else:
            attrs = {k: v for k, v in json.loads(good.value or b"{}").items() if k != "sourceversion"}
            no_version = rec(json.dumps(attrs).encode())
        broken = rec(b"{broken", headers=(("content-type", b"application/cloudevents+json"),))
        return [(no_version, bad_decode), (broken, bad_decode)]
    assert fmt == "cdc"
    no_position = json.dumps({"op": "c", "after": {"kind": "email"}, "source": {"ts_ms": 1}}).encode()
    cdc_key = json.dumps({"org_id": "org-0000", "source": "gmail", "external_id": "m1"}).encode()
    return [
        (Record(cdc_key, no_position, ActivityCdcAgent.topic), bad_decode),  # a CDC record without a position
        (Record(cdc_key, b"{not json", ActivityCdcAgent.topic), bad_decode),
        (Record(b"[1]", no_position, ActivityCdcAgent.topic), bad_decode),  # a key that is no row key
    ]
