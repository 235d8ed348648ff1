"""Protocol v4 framing and request decoding (the driver's message classes only encode requests)."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from cassandra.marshal import int64_unpack
from cassandra.protocol import (
    read_binary_longstring,
    read_binary_string,
    read_byte,
    read_bytesmap,
    read_int,
    read_longstring,
    read_short,
    read_stringlist,
    read_stringmap,
)

from tests.support.cql_server.errors import ProtocolViolation

_T = TypeVar("_T")

__all__ = [
    "HEADER",
    "VERSION",
    "UNSET",
    "Frame",
    "QueryOptions",
    "QueryRequest",
    "ExecuteRequest",
    "BatchRequest",
    "encode_frame",
    "decode_header",
    "read_query",
    "read_prepare",
    "read_execute",
    "read_batch",
    "read_startup",
    "read_register",
    "skip_custom_payload",
]

HEADER = struct.Struct(">BBhBi")
VERSION = 4
_RESPONSE = 0x80
_MAX_BODY = 256 * 1024 * 1024
FLAG_COMPRESSED, FLAG_TRACING, FLAG_CUSTOM_PAYLOAD = 0x01, 0x02, 0x04
_VALUES, _SKIP_METADATA, _PAGE_SIZE, _PAGING_STATE = 0x01, 0x02, 0x04, 0x08
_SERIAL_CONSISTENCY, _TIMESTAMP, _NAMES_FOR_VALUES = 0x10, 0x20, 0x40


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: A bound value sent as "not set" (length -2): the column keeps its value, options take defaults.
UNSET = _Unset()
Value = bytes | None | _Unset


@dataclass(frozen=True)
class Frame:
    version: int
    flags: int
    stream: int
    opcode: int
    length: int


def decode_header(raw: bytes) -> Frame:
    """The frame header; ProtocolViolation for a response frame or an oversized body."""
    version, flags, stream, opcode, length = HEADER.unpack(raw)
    if version & _RESPONSE:
        raise ProtocolViolation("received a response frame from the client")
    if not 0 <= length <= _MAX_BODY:
        raise ProtocolViolation(f"frame body of {length} bytes")
    return Frame(version, flags, stream, opcode, length)


def encode_frame(stream: int, opcode: int, body: bytes, version: int = VERSION) -> bytes:
    return HEADER.pack(_RESPONSE | version, 0, stream, opcode, len(body)) + body


@dataclass
class QueryOptions:
    """The [query parameters] of QUERY and EXECUTE."""

    consistency: int = 1
    values: list[Value] = field(default_factory=list)
    skip_metadata: bool = False
    page_size: int | None = None
    paging_state: bytes | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class QueryRequest:
    text: str
    options: QueryOptions


@dataclass(frozen=True)
class ExecuteRequest:
    query_id: bytes
    options: QueryOptions


@dataclass(frozen=True)
class BatchRequest:
    """``items``: (query text or None, prepared id or None, values)."""

    kind: int
    items: list[tuple[str | None, bytes | None, list[Value]]]
    timestamp: int | None


def read_long(f: io.BytesIO) -> int:
    return int64_unpack(f.read(8))


def _value(f: io.BytesIO) -> Value:
    size = read_int(f)
    if size == -2:
        return UNSET
    if size < 0:
        return None
    data = f.read(size)
    if len(data) != size:
        raise ProtocolViolation("truncated value")
    return data


def _values(f: io.BytesIO) -> list[Value]:
    return [_value(f) for _ in range(read_short(f))]


def _options(f: io.BytesIO) -> QueryOptions:
    opts = QueryOptions(consistency=read_short(f))
    flags = read_byte(f)
    if flags & _NAMES_FOR_VALUES:
        raise ProtocolViolation("named values (flag 0x40) are not supported by the CQL test server")
    if flags & _VALUES:
        opts.values = _values(f)
    opts.skip_metadata = bool(flags & _SKIP_METADATA)
    if flags & _PAGE_SIZE:
        size = read_int(f)
        opts.page_size = size if size > 0 else None
    if flags & _PAGING_STATE:
        opts.paging_state = read_binary_longstring(f)
    if flags & _SERIAL_CONSISTENCY:
        read_short(f)
    if flags & _TIMESTAMP:
        opts.timestamp = read_long(f)
    return opts


def _reader(body: bytes) -> io.BytesIO:
    return io.BytesIO(body)


def _done(f: io.BytesIO, what: str) -> None:
    if f.read(1):
        raise ProtocolViolation(f"trailing bytes after the {what} body")


def _guard(fn: Callable[[bytes], _T]) -> Callable[[bytes], _T]:
    """Turn short reads (struct.error) into a ProtocolViolation."""

    def wrapped(body: bytes) -> _T:
        try:
            return fn(body)
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, ProtocolViolation):
                raise
            raise ProtocolViolation(f"malformed {fn.__name__.removeprefix('read_')} body: {exc}") from exc

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


@_guard
def read_startup(body: bytes) -> dict[str, str]:
    f = _reader(body)
    options = read_stringmap(f)
    _done(f, "STARTUP")
    return options


@_guard
def read_register(body: bytes) -> list[str]:
    f = _reader(body)
    events = read_stringlist(f)
    _done(f, "REGISTER")
    return events


@_guard
def read_query(body: bytes) -> QueryRequest:
    f = _reader(body)
    text = read_longstring(f)
    opts = _options(f)
    _done(f, "QUERY")
    return QueryRequest(text, opts)


@_guard
def read_prepare(body: bytes) -> str:
    f = _reader(body)
    text = read_longstring(f)
    _done(f, "PREPARE")
    return text


@_guard
def read_execute(body: bytes) -> ExecuteRequest:
    f = _reader(body)
    query_id = read_binary_string(f)
    opts = _options(f)
    _done(f, "EXECUTE")
    return ExecuteRequest(query_id, opts)


@_guard
def read_batch(body: bytes) -> BatchRequest:
    f = _reader(body)
    kind = read_byte(f)
    items: list[tuple[str | None, bytes | None, list[Value]]] = []
    for _ in range(read_short(f)):
        if read_byte(f) == 0:
            items.append((read_longstring(f), None, _values(f)))
        else:
            items.append((None, read_binary_string(f), _values(f)))
    read_short(f)  # consistency
    flags = read_byte(f)
    if flags & _NAMES_FOR_VALUES:
        raise ProtocolViolation("named values (flag 0x40) are not supported by the CQL test server")
    if flags & _SERIAL_CONSISTENCY:
        read_short(f)
    timestamp = read_long(f) if flags & _TIMESTAMP else None
    _done(f, "BATCH")
    return BatchRequest(kind, items, timestamp)


def skip_custom_payload(body: bytes) -> bytes:
    """The body after a custom payload (flag 0x04), which the server ignores."""
    f = _reader(body)
    read_bytesmap(f)
    return f.read()
