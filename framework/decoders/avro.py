"""Avro records in the schema-registry wire format (needs the ``decoders`` extra: fastavro).

The writer's schema comes from the registry by the record's schema id (fetched and parsed once);
``reader_schema``, when given, is the schema the app reads with (Avro schema resolution: an added
field with a default is filled in; a field the reader needs that the writer's schema removed is a
``DecodeError``, parked at ``parse``). A payload that does not decode (truncated, corrupt) is a
``DecodeError`` too. Version rule: ``framework.decoders.fields`` (a declared field of the record).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from framework.core.events import Event
from framework.core.extras import needs_extra
from framework.decoders.base import DecodeError, Record
from framework.decoders.fields import EventFields, to_event
from framework.decoders.registry import RegisteredSchema, SchemaRegistry, split_wire, wire

__all__ = ["AvroDecoder", "avro_payload"]


def _fastavro() -> Any:
    with needs_extra("AvroDecoder"):
        import fastavro
    return fastavro


def avro_payload(schema: Mapping[str, Any], value: Mapping[str, Any], schema_id: int) -> bytes:
    """``value`` Avro-encoded with ``schema`` in the wire format (what a producer's serializer sends)."""
    fastavro = _fastavro()
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(dict(schema)), dict(value))
    return wire(schema_id, out.getvalue())


class AvroDecoder:
    """Wire-format Avro records to events (see the module doc)."""

    name: ClassVar[str] = "avro"
    checks_key: ClassVar[bool] = False

    def __init__(
        self,
        registry: SchemaRegistry,
        fields: EventFields | None = None,
        *,
        reader_schema: Mapping[str, Any] | None = None,
        reader_key_schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.registry = registry
        self.fields = fields or EventFields()
        self._fastavro = _fastavro()
        parse = self._fastavro.parse_schema
        self.reader_schema = None if reader_schema is None else parse(dict(reader_schema))
        self.reader_key_schema = None if reader_key_schema is None else parse(dict(reader_key_schema))

    def _writer(self, schema: RegisteredSchema) -> Any:
        return self._fastavro.parse_schema(json.loads(schema.schema))

    def read_key(self, record: Record) -> Any:
        """The record's key decoded (Avro keys in the wire format, e.g. Debezium's row keys)."""
        return self._read(record.key, self.reader_key_schema)

    def read(self, record: Record) -> Any:
        """The record's value decoded (a dict for an Avro record)."""
        return self._read(record.value, self.reader_schema)

    def _read(self, data: bytes | None, reader: Any) -> Any:
        schema_id, payload = split_wire(data)
        writer = self.registry.parsed(schema_id, "AVRO", self._writer)
        buf = io.BytesIO(payload)
        try:
            value = self._fastavro.schemaless_reader(buf, writer, reader)
        except Exception as exc:  # noqa: BLE001 - truncated, corrupt or not resolvable: the record's
            raise DecodeError("avro", f"schema id {schema_id}: {type(exc).__name__}: {exc}") from None
        if buf.tell() != len(payload):
            raise DecodeError("avro", f"schema id {schema_id}: {len(payload) - buf.tell()} bytes left over")
        return value

    def decode(self, record: Record) -> Event:
        return to_event(record, self.read(record), self.fields)

    def __repr__(self) -> str:
        return f"AvroDecoder({self.registry!r})"
