"""JSON documents in the schema-registry wire format, validated by their JSON Schema (needs the
``decoders`` extra: jsonschema).

The schema comes from the registry by the record's schema id (fetched, checked and compiled into
a validator once). A payload that is not JSON, or not valid under its schema, is a ``DecodeError``
parked at ``parse``. Version rule: ``framework.decoders.fields`` (a declared field of the document).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from framework.core.events import Event
from framework.core.extras import needs_extra
from framework.decoders.base import DecodeError, Record
from framework.decoders.fields import EventFields, to_event
from framework.decoders.registry import RegisteredSchema, SchemaRegistry, split_wire

__all__ = ["JsonSchemaDecoder"]


def _jsonschema() -> Any:
    with needs_extra("JsonSchemaDecoder"):
        import jsonschema
    return jsonschema


class JsonSchemaDecoder:
    """Wire-format JSON documents to events (see the module doc)."""

    name: ClassVar[str] = "json_schema"
    checks_key: ClassVar[bool] = False

    def __init__(self, registry: SchemaRegistry, fields: EventFields | None = None) -> None:
        self.registry = registry
        self.fields = fields or EventFields()
        self._jsonschema = _jsonschema()

    def _validator(self, schema: RegisteredSchema) -> Any:
        document = json.loads(schema.schema)
        cls = self._jsonschema.validators.validator_for(document)
        cls.check_schema(document)
        return cls(document)

    def read(self, record: Record) -> Any:
        """The record's JSON document, validated."""
        schema_id, payload = split_wire(record.value)
        validator = self.registry.parsed(schema_id, "JSON", self._validator)
        try:
            value = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise DecodeError("json", f"schema id {schema_id}: not JSON: {exc}") from None
        if validator.is_valid(value):
            return value
        error = self._jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(document)"
            raise DecodeError("json_schema", f"schema id {schema_id}: {where}: {error.message}"[:500])
        return value

    def decode(self, record: Record) -> Event:
        return to_event(record, self.read(record), self.fields)

    def __repr__(self) -> str:
        return f"JsonSchemaDecoder({self.registry!r})"
