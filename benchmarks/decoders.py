"""CPU per event of each record decoder (``framework.decoders``) against converge's envelope.

    .venv/bin/python -m benchmarks.decoders --events 20000 --runs 5

The calibration line comes first (``benchmarks.calibration.calibrate``; ``--calibration-records 0``
leaves it out).

The same ticket change (ten payload fields) is encoded in each format: the envelope, a Debezium
change event (CDC, JSON), Avro, JSON Schema and Protobuf in the registry wire format, and a
CloudEvent in structured and in binary mode. Each timed step is the worker's own parse of one
record (``framework.runtime.processor.parse_work`` with the agent's decoder: building the record,
decoding, the checks), measured with ``time.process_time`` over ``--events`` records; the runs
interleave the formats (each run measures every format once, in a rotated order), and the figure
is the median of the runs with their range. The registry is the in-process stand-in, warm (each
schema fetched once before timing: the steady state). The machine's load is printed: on shared
cores the absolute figures move, the ratios less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from framework.core.events import Event
from framework.decoders.avro import AvroDecoder, avro_payload
from framework.decoders.cdc import CdcDecoder
from framework.decoders.cloudevents import STRUCTURED, CloudEventsDecoder
from framework.decoders.fields import EventFields
from framework.decoders.json_schema import JsonSchemaDecoder
from framework.decoders.protobuf import ProtobufDecoder, protobuf_payload
from framework.decoders.registry import SchemaRegistry, wire
from framework.decoders.registry_server import RegistryStandIn
from framework.runtime.processor import parse_work
from framework.runtime.work import Work

FIELDS = ("subject", "requester_email", "requester_name", "priority", "assignee", "status", "channel",
          "language", "team", "note")  # fmt: skip
AVRO = {"type": "record", "name": "TicketChanged", "fields": [
    {"name": "event_id", "type": "string"}, {"name": "version", "type": "long"},
    *({"name": f, "type": "string"} for f in FIELDS)]}  # fmt: skip
JSON_SCHEMA = json.dumps({"type": "object", "required": ["event_id", "version"],
                          "properties": {"event_id": {"type": "string"}, "version": {"type": "integer"},
                                         **{f: {"type": "string"} for f in FIELDS}}})  # fmt: skip
PROTO = "syntax = 'proto3'; message TicketChanged { string event_id = 1; int64 version = 2; ... }"


def _proto_class() -> type:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="bench_ticket.proto", package="bench", syntax="proto3")
    m = fdp.message_type.add(name="TicketChanged")
    F = descriptor_pb2.FieldDescriptorProto  # noqa: N806
    m.field.add(name="event_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    m.field.add(name="version", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    for i, f in enumerate(FIELDS, start=3):
        m.field.add(name=f, number=i, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.TicketChanged"))


def _row(i: int) -> dict[str, Any]:
    return {f: f"{f}-{i % 97}" for f in FIELDS}


def formats(n: int, registry: RegistryStandIn) -> dict[str, tuple[Any, list[Work]]]:
    """Each format's decoder (None: the envelope) and ``n`` works of it."""
    client = SchemaRegistry(registry.url)
    fields = EventFields(type="ticket.changed")
    avro_id = registry.register("bench-avro", json.dumps(AVRO))
    json_id = registry.register("bench-json", JSON_SCHEMA, "JSON")
    proto_id = registry.register("bench-proto", PROTO, "PROTOBUF")
    proto = _proto_class()
    out: dict[str, tuple[Any, list[Work]]] = {}

    def add(
        name: str, decoder: Any, make: Callable[[int], tuple[bytes, bytes | None, tuple[Any, ...]]]
    ) -> None:
        works = []
        for i in range(n):
            key, value, headers = make(i)
            works.append(Work(("bench", 0), i, key, value, headers=headers, decoder=decoder))
        out[name] = (decoder, works)

    def key(i: int) -> bytes:
        return f"t{i % 7}/zendesk/{i % 1000}".encode()

    def version(i: int) -> int:
        return 1_700_000_000_000_000 + i

    def envelope(i: int) -> tuple[bytes, bytes, tuple[Any, ...]]:
        event = Event(f"e{i}", key(i).decode(), version(i), version(i), "ticket.changed", _row(i))
        return key(i), event.to_json(), ()

    add("envelope", None, envelope)

    def cdc(i: int) -> tuple[bytes, bytes, tuple[Any, ...]]:
        k = {"tenant": f"t{i % 7}", "source": "zendesk", "external_id": str(i % 1000)}
        value = {"before": None, "after": {**k, **_row(i)}, "op": "u", "ts_ms": 1_700_000_000_000 + i,
                 "source": {"name": "helpdesk", "db": "h", "table": "tickets", "ts_ms": 1_700_000_000_000 + i,
                            "lsn": 1000 + i}, "transaction": {"id": str(i), "total_order": 1}}  # fmt: skip
        return json.dumps(k).encode(), json.dumps(value).encode(), ()

    add("cdc", CdcDecoder("ticket"), cdc)
    add("avro", AvroDecoder(client, fields), lambda i: (key(i), avro_payload(AVRO, {"event_id": f"e{i}",
        "version": version(i), **_row(i)}, avro_id), ()))  # fmt: skip
    add("json_schema", JsonSchemaDecoder(client, fields), lambda i: (key(i), wire(json_id, json.dumps(
        {"event_id": f"e{i}", "version": version(i), **_row(i)}).encode()), ()))  # fmt: skip
    add("protobuf", ProtobufDecoder(client, proto, fields), lambda i: (key(i), protobuf_payload(
        proto(event_id=f"e{i}", version=version(i), **_row(i)), proto_id), ()))  # fmt: skip

    def attrs(i: int) -> dict[str, str]:
        return {"specversion": "1.0", "id": f"e{i}", "source": "/helpdesk", "type": "ticket.changed",
                "time": f"2026-03-01T10:00:{i % 60:02d}.{i % 1_000_000:06d}Z"}  # fmt: skip

    add("cloudevents_structured", CloudEventsDecoder(), lambda i: (key(i), json.dumps(
        {**attrs(i), "datacontenttype": "application/json", "data": _row(i)}).encode(),
        (("content-type", STRUCTURED.encode()),)))  # fmt: skip

    def binary(i: int) -> tuple[bytes, bytes, tuple[Any, ...]]:
        headers = tuple((f"ce_{k}", v.encode()) for k, v in attrs(i).items())
        return key(i), json.dumps(_row(i)).encode(), (*headers, ("content-type", b"application/json"))

    add("cloudevents_binary", CloudEventsDecoder(), binary)
    return out


def measure(works: list[Work]) -> float:
    """CPU microseconds per record of ``parse_work`` over ``works``."""
    started = time.process_time()
    for w in works:
        parse_work(w)
    return (time.process_time() - started) / len(works) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calibration-records", type=int, default=200_000)
    args = parser.parse_args(argv)
    if args.calibration_records > 0:
        import tempfile
        from pathlib import Path

        from benchmarks.calibration import calibrate

        with tempfile.TemporaryDirectory() as tmp:
            print(calibrate(Path(tmp) / "calibration", args.calibration_records), flush=True)
    with RegistryStandIn() as registry:
        cases = formats(args.events, registry)
        for _, works in cases.values():  # warm: every schema fetched, every check passes
            for w in works[:10]:
                parse_work(w)
        names = list(cases)
        results: dict[str, list[float]] = {n: [] for n in names}
        load = [os.getloadavg()[0]]
        for run in range(args.runs):
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                results[name].append(measure(cases[name][1]))
            load.append(os.getloadavg()[0])
    base = statistics.median(results["envelope"])
    print(f"{args.events} records a format, {args.runs} interleaved runs, {os.cpu_count()} cores, "
          f"load {min(load):.1f}-{max(load):.1f}")  # fmt: skip
    print(f"{'format':<24} {'us/event median':>16} {'range':>16} {'x envelope':>11}")
    for name in names:
        r = results[name]
        med = statistics.median(r)
        print(f"{name:<24} {med:16.1f} {min(r):7.1f}-{max(r):<8.1f} {med / base:11.2f}")


if __name__ == "__main__":
    main()
