"""How a decoded record (a mapping of fields: an Avro record, a JSON document, a Protobuf message)
becomes an ``Event``: which fields carry its id, version, time and type.

**Version rule** of the registry formats: the record's ``version_field`` (the source's modification
time, in ``unit``: ``us``, ``ms`` or ``s``, or a datetime), never the Kafka timestamp nor the
processing clock. A record without it is a ``DecodeError``. The ordering key is the record's Kafka
key (UTF-8 text; ``key_field`` when the producer sets none); the event id is ``id_field``'s value,
else ``<topic>/<partition>/<offset>`` (stable across replays of the same log, not across a
re-publication, which writes the same cells at the same version anyway). ``occurred_at`` is
``time_field``'s value (default: the version). The payload is every field of the record.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from framework.core.events import Event
from framework.core.mutations import MAX_VERSION
from framework.decoders.base import DecodeError, Record

__all__ = ["EventFields", "to_event", "micros"]

Unit = Literal["us", "ms", "s"]
_SCALE = {"us": 1, "ms": 1000, "s": 1_000_000}


@dataclass(frozen=True, slots=True)
class EventFields:
    """Which fields of a decoded record make the event (see the module doc). ``type``: a fixed
    event type, else ``type_field``'s value."""

    version_field: str = "version"
    unit: Unit = "us"
    type: str | None = None
    type_field: str = "type"
    id_field: str | None = "event_id"
    time_field: str | None = None
    key_field: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in _SCALE:
            raise ValueError(f"EventFields: unit must be one of {sorted(_SCALE)}, not {self.unit!r}")


def micros(value: Any, unit: Unit, name: str) -> int:
    """``value`` (an integer in ``unit``, or a datetime) in integer microseconds; DecodeError."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise DecodeError(name, "a datetime needs a time zone")
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        v = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    elif isinstance(value, int) and not isinstance(value, bool):
        v = value * _SCALE[unit]
    else:
        raise DecodeError(name, f"must be an integer ({unit}) or a datetime, got {type(value).__name__}")
    if v < 0 or v > MAX_VERSION:
        raise DecodeError(name, f"out of range: {value!r}")
    return v


def _text(value: Any, name: str, max_len: int = 512) -> str:
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise DecodeError(name, f"must be a non-empty string of at most {max_len} characters, got {value!r}")
    return value


def to_event(record: Record, value: Any, fields: EventFields) -> Event:
    """The event of ``record`` whose decoded value is ``value`` (see the module doc)."""
    if not isinstance(value, Mapping):
        raise DecodeError("value", f"must decode to a record of fields, got {type(value).__name__}")
    if fields.version_field not in value or value[fields.version_field] is None:
        raise DecodeError(fields.version_field, "missing: the version (the source's modification time)")
    version = micros(value[fields.version_field], fields.unit, fields.version_field)
    occurred = version
    if fields.time_field is not None and value.get(fields.time_field) is not None:
        occurred = micros(value[fields.time_field], fields.unit, fields.time_field)
    if record.key is not None:
        try:
            ordering = _text(record.key.decode("utf-8"), "key")
        except UnicodeDecodeError:
            raise DecodeError("key", "the Kafka key is not UTF-8 text") from None
    elif fields.key_field is not None:
        ordering = _text(value.get(fields.key_field), fields.key_field)
    else:
        raise DecodeError("key", "the record has no key")
    if fields.id_field is not None and value.get(fields.id_field) is not None:
        event_id = _text(str(value[fields.id_field]), fields.id_field)
    else:
        event_id = f"{record.topic}/{record.partition}/{record.offset}"
    kind = (
        fields.type
        if fields.type is not None
        else _text(value.get(fields.type_field), fields.type_field, 128)
    )
    return Event(event_id, ordering, version, occurred, kind, dict(value))
