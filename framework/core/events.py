"""The event envelope and its strict parser."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from framework.core.errors import BadMessage
from framework.core.mutations import MAX_VERSION

__all__ = ["Event", "EventError", "parse_event", "MAX_EVENT_BYTES", "MAX_DEPTH"]

#: Largest encoded event accepted.
MAX_EVENT_BYTES = 1 << 20
#: Deepest nesting of objects and arrays accepted in an event.
MAX_DEPTH = 64


class EventError(BadMessage):
    """An event could not be parsed or validated; ``field`` names the bad part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


#: ``json.dumps(value, separators=(",", ":"), sort_keys=True)``, its encoder built once.
_canonical = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


@dataclass(frozen=True, slots=True)
class Event:
    """One source event.

    ``event_id`` is stable across replays; ``ordering_key`` is the Kafka key;
    ``version`` is the source's modification time in integer microseconds;
    ``occurred_at`` is when it happened, also in microseconds.
    """

    event_id: str
    ordering_key: str
    version: int
    occurred_at: int
    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "ordering_key": self.ordering_key,
            "version": self.version,
            "occurred_at": self.occurred_at,
            "type": self.type,
            "payload": dict(self.payload),
        }

    def to_json(self) -> bytes:
        return _canonical(self.to_dict()).encode()


def _text(d: Mapping[str, Any], name: str, max_len: int = 512) -> str:
    if name not in d:
        raise EventError(name, "missing")
    v = d[name]
    if not isinstance(v, str) or not v:
        raise EventError(name, f"must be a non-empty string, got {type(v).__name__}")
    if len(v) > max_len:
        raise EventError(name, f"longer than {max_len} characters")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise EventError(name, "not valid Unicode (lone surrogate)") from None
    return v


def _micros(d: Mapping[str, Any], name: str) -> int:
    if name not in d:
        raise EventError(name, "missing")
    v = d[name]
    if isinstance(v, bool) or not isinstance(v, int):
        raise EventError(name, f"must be integer microseconds, got {type(v).__name__}")
    if v < 0 or v > MAX_VERSION:
        raise EventError(name, f"out of range: {v}")
    return v


def _check_depth(value: Any) -> None:
    """EventError when objects and arrays nest deeper than MAX_DEPTH (checked without recursion)."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for v in level
            for child in (v.values() if isinstance(v, Mapping) else v if isinstance(v, list) else ())
            if isinstance(child, Mapping | list)
        ]
        if not level:
            return
    raise EventError("event", f"nested deeper than {MAX_DEPTH} levels")


#: Every digit to ``1``, every other byte to a space: a run of 19 ``1`` in the translation is a
#: literal that may hold an integer beyond 64 bits, which orjson would read as a float.
_DIGITS = bytes(0x31 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"1" * 19


def parse_event(raw: bytes | str | Mapping[str, Any]) -> Event:
    """Parse JSON bytes, text or a decoded mapping into an Event; raise EventError.

    Bytes are read by orjson when it gives what ``json.loads`` gives: no digit run that may be an
    integer beyond 64 bits; anything orjson refuses is read again by the standard library, whose
    answer (or error) stands."""
    if type(raw) is bytes and len(raw) <= MAX_EVENT_BYTES and _LONG_RUN not in raw.translate(_DIGITS):
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the standard library below names the error
        else:
            if isinstance(decoded, Mapping) and raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
                _check_depth(decoded)
            return _event_of(decoded)
    if isinstance(raw, bytes | bytearray | memoryview):
        if len(raw) > MAX_EVENT_BYTES:
            raise EventError("event", f"larger than {MAX_EVENT_BYTES} bytes")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventError("event", f"not UTF-8: {exc}") from None
    shallow = False
    if isinstance(raw, str):
        if len(raw) > MAX_EVENT_BYTES:
            raise EventError("event", f"larger than {MAX_EVENT_BYTES} bytes")
        shallow = raw.count("{") + raw.count("[") <= MAX_DEPTH  # cannot nest deeper: no walk needed
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EventError("event", f"not JSON: {exc.msg} at {exc.pos}") from None
        except RecursionError:
            raise EventError("event", f"nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise EventError("event", f"not acceptable JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise EventError("event", f"must be a JSON object, got {type(raw).__name__}")
    if not shallow:
        _check_depth(raw)
    return _event_of(raw)


#: ``payload`` absent (the event's payload is then empty).
_NO_PAYLOAD: dict[str, Any] = {}


def _event_of(raw: Any) -> Event:
    """The Event of a decoded JSON value; EventError unless it is a valid envelope."""
    if type(raw) is dict:  # the common envelope, checked at once; anything else by the rules below
        get = raw.get
        eid, key, kind = get("event_id"), get("ordering_key"), get("type")
        version, at = get("version"), get("occurred_at")
        payload = get("payload", _NO_PAYLOAD)
        if (
            type(eid) is str and type(key) is str and type(kind) is str
            and 0 < len(eid) <= 512 and 0 < len(key) <= 512 and 0 < len(kind) <= 128
            and eid.isascii() and key.isascii() and kind.isascii()
            and type(version) is int and type(at) is int
            and 0 <= version <= MAX_VERSION and 0 <= at <= MAX_VERSION
            and type(payload) is dict
        ):  # fmt: skip
            return Event(eid, key, version, at, kind, {} if payload is _NO_PAYLOAD else payload)
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a dict first: the ABC check is slow
        raise EventError("event", f"must be a JSON object, got {type(raw).__name__}")
    payload = raw.get("payload", {})
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise EventError("payload", f"must be an object, got {type(payload).__name__}")
    return Event(
        event_id=_text(raw, "event_id"),
        ordering_key=_text(raw, "ordering_key"),
        version=_micros(raw, "version"),
        occurred_at=_micros(raw, "occurred_at"),
        type=_text(raw, "type", 128),
        payload=payload,
    )
