"""What a decoder is: one Kafka record in, one ``Event`` out, or a ``DecodeError`` (a BadMessage).

A decoder plugs an agent onto a topic that does not carry converge's JSON
envelope (``KeyedAgent.decoder``). It is a pure function of the record, like
``handle``: the worker, the test kit and the Spark backfill and ingest run the
same decoder on the same record and get the same event, so its ``version`` rule
(each decoder documents its own) is what makes replays converge.

A record that does not decode raises ``DecodeError`` (or any ``BadMessage``):
the runtime parks it at stage ``parse`` with the error's class and goes on.

``Record`` is the record as the decoder sees it; ``record_to_json`` and
``record_from_json`` are its archived form, one JSON object per line, how a
backfill reads archives kept in the source's own format::

    {"topic": "db.public.tickets", "partition": 0, "offset": 17, "timestamp": 1700000000000,
     "key": "<base64>", "value": "<base64>" | null, "headers": [["name", "<base64>" | null]]}
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from framework.core.errors import BadMessage
from framework.core.events import Event

__all__ = ["Decoder", "DecodeError", "Record", "Headers", "record_to_json", "record_from_json", "header"]

#: Kafka headers: (name, value) pairs in order, a name may repeat.
Headers = tuple[tuple[str, bytes | None], ...]


class DecodeError(BadMessage):
    """A record could not be decoded into an event; ``part`` names what was wrong with it."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}")
        self.part = part


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record: where it was (topic, partition, offset), its timestamp (epoch ms, None
    when unknown), key, value (None: a tombstone) and headers."""

    key: bytes | None
    value: bytes | None
    topic: str = ""
    partition: int = 0
    offset: int = -1
    timestamp: int | None = None
    headers: Headers = ()


def header(record: Record, name: str) -> bytes | None:
    """The last value of header ``name`` (None when absent)."""
    found = None
    for k, v in record.headers:
        if k == name:
            found = v
    return found


@runtime_checkable
class Decoder(Protocol):
    """Turns a record into an event; raises ``DecodeError`` (a ``BadMessage``) when it cannot.

    ``name`` names the decoder in logs and docs. ``checks_key``: the runtime parks an event whose
    ``ordering_key`` differs from the record's UTF-8 key at stage ``key`` (the envelope's rule; a
    decoder that derives the ordering key from the record's key sets it False)."""

    @property
    def name(self) -> str: ...

    @property
    def checks_key(self) -> bool: ...

    def decode(self, record: Record) -> Event: ...


def normalize_headers(headers: Any) -> Headers:
    """Kafka client headers (a list of pairs, or a mapping) as ``Headers``."""
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for k, v in items:
        name = k.decode("utf-8", "replace") if isinstance(k, bytes | bytearray) else str(k)
        out.append((name, None if v is None else bytes(v)))
    return tuple(out)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_to_json(record: Record) -> bytes:
    """The archived form of ``record``: one line of JSON (no newline)."""
    d = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _b64(record.key),
        "value": _b64(record.value),
        "headers": [[k, _b64(v)] for k, v in record.headers],
    }
    return json.dumps(d, separators=(",", ":"), sort_keys=True).encode()


def _unb64(d: Mapping[str, Any], name: str) -> bytes | None:
    v = d.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        raise DecodeError(name, f"must be base64 text or null, got {type(v).__name__}")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DecodeError(name, f"not base64: {exc}") from None


def _int(d: Mapping[str, Any], name: str, default: int | None) -> int | None:
    v = d.get(name, default)
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    raise DecodeError(name, f"must be an integer, got {type(v).__name__}")


def record_from_json(line: bytes | str) -> Record:
    """The record archived as ``line`` (``record_to_json``); DecodeError when it is not one."""
    try:
        d = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise DecodeError("record", f"not JSON: {exc}") from None
    if not isinstance(d, dict):
        raise DecodeError("record", f"must be a JSON object, got {type(d).__name__}")
    topic = d.get("topic")
    if not isinstance(topic, str) or not topic:
        raise DecodeError("topic", "an archived record names its topic")
    headers = d.get("headers") or []
    if not isinstance(headers, Sequence) or not all(
        isinstance(h, Sequence) and len(h) == 2 and isinstance(h[0], str) for h in headers
    ):
        raise DecodeError("headers", "must be a list of [name, base64 or null] pairs")
    return Record(
        key=_unb64(d, "key"),
        value=_unb64(d, "value"),
        topic=topic,
        partition=_int(d, "partition", 0) or 0,
        offset=_int(d, "offset", -1) if d.get("offset") is not None else -1,  # type: ignore[arg-type]
        timestamp=_int(d, "timestamp", None),
        headers=tuple((k, _unb64({"v": v}, "v")) for k, v in headers),
    )
