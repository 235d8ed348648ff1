"""Protobuf messages in the schema-registry wire format (needs the ``decoders`` extra: protobuf).

After the schema id, the wire format has the message indexes (a zig-zag varint count, then each
index; ``[0]``, the file's first message, is the single byte 0), then the message. Python cannot
compile the registered ``.proto`` text without ``protoc``, so the app gives its generated message
class (``message_class``) and the indexes it is found at (default ``[0]``); the registry still
vouches for the schema id (an unknown id, or one of another type, is parked at ``parse``, as are
other indexes and a message that does not parse). Fields become the event's payload by their
proto names (int64 stays an integer, enums their number, unset proto3 scalars their default; of a
``oneof``, proto3 ``optional`` included, only the member that is set).
Version rule: ``framework.decoders.fields`` (a declared field of the message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from framework.core.events import Event
from framework.decoders.base import DecodeError, Record
from framework.decoders.fields import EventFields, to_event
from framework.decoders.registry import RegisteredSchema, SchemaRegistry, split_wire, wire

__all__ = ["ProtobufDecoder", "protobuf_payload", "message_indexes", "to_dict"]


def _zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_zigzag(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise DecodeError("protobuf", "truncated message indexes")
        b = data[at]
        at += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def message_indexes(data: bytes) -> tuple[list[int], int]:
    """The message indexes at the start of ``data`` and where the message begins."""
    count, at = _read_zigzag(data, 0)
    if count == 0:
        return [0], at
    if count < 0 or count > 100:
        raise DecodeError("protobuf", f"implausible message index count {count}")
    indexes = []
    for _ in range(count):
        i, at = _read_zigzag(data, at)
        indexes.append(i)
    return indexes, at


def protobuf_payload(message: Any, schema_id: int, indexes: Sequence[int] = (0,)) -> bytes:
    """``message`` in the wire format (what a producer's serializer sends)."""
    head = b"\x00" if list(indexes) == [0] else _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)
    return wire(schema_id, head + message.SerializeToString())


def to_dict(message: Any) -> dict[str, Any]:
    """A message's fields by name (nested messages as dicts, repeated as lists, maps as dicts; of a
    ``oneof``, only the member set, none when none is)."""
    out: dict[str, Any] = {}
    for f in message.DESCRIPTOR.fields:
        oneof = f.containing_oneof
        if oneof is not None and message.WhichOneof(oneof.name) != f.name:
            continue
        value = getattr(message, f.name)
        is_message = f.message_type is not None
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = {k: to_dict(v) if vf.message_type is not None else v for k, v in value.items()}
        elif _repeated(f):
            out[f.name] = [to_dict(v) if is_message else v for v in value]
        elif is_message:
            out[f.name] = to_dict(value) if message.HasField(f.name) else None
        else:
            out[f.name] = value
    return out


def _repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == field.LABEL_REPEATED)


class ProtobufDecoder:
    """Wire-format Protobuf messages of ``message_class`` to events (see the module doc)."""

    name: ClassVar[str] = "protobuf"
    checks_key: ClassVar[bool] = False

    def __init__(
        self,
        registry: SchemaRegistry,
        message_class: type,
        fields: EventFields | None = None,
        *,
        indexes: Sequence[int] = (0,),
    ) -> None:
        self.registry = registry
        self.message_class = message_class
        self.fields = fields or EventFields()
        self.indexes = list(indexes)
        self._full_name = message_class.DESCRIPTOR.full_name  # type: ignore[attr-defined]

    def _check(self, schema: RegisteredSchema) -> bool:
        short = self._full_name.rsplit(".", 1)[-1]
        if f"message {short}" not in schema.schema:
            raise ValueError(f"declares no message {short}")
        return True

    def read(self, record: Record) -> dict[str, Any]:
        """The record's message as a dict of its fields."""
        schema_id, payload = split_wire(record.value)
        self.registry.parsed(schema_id, "PROTOBUF", self._check)
        indexes, at = message_indexes(payload)
        if indexes != self.indexes:
            raise DecodeError(
                "protobuf", f"schema id {schema_id}: message indexes {indexes}, not {self.indexes}"
            )
        try:
            message = self.message_class.FromString(payload[at:])  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - google.protobuf.message.DecodeError and kin
            raise DecodeError("protobuf", f"schema id {schema_id}: {type(exc).__name__}: {exc}") from None
        return to_dict(message)

    def decode(self, record: Record) -> Event:
        return to_event(record, self.read(record), self.fields)

    def __repr__(self) -> str:
        return f"ProtobufDecoder({self._full_name})"
