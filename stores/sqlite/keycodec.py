"""Canonical, order-preserving byte encoding of primary-key values.

``encode_key`` turns the values of some key columns into bytes such that equal
keys give equal bytes and byte order (memcmp, as SQLite compares BLOBs) equals
the ascending order Cassandra gives the value tuples (doubles as Java's
``Double.compare``: ``-0.0`` is its own key, just below ``0.0``). Every
component is prefix-free, so a tuple prefix encodes to a byte prefix of the
full key. Files written before ``-0.0`` kept its sign hold such keys and
values as ``0.0``; their bytes are unchanged, so they read as before.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence

from framework.core.mutations import CellValue
from framework.core.schema import Column, SchemaError, TableSchema

__all__ = [
    "encode_key",
    "encode_checked_key",
    "encode_checked_value",
    "decode_key",
    "prefix_end",
    "partition_hash",
    "normalize",
]

_SIGN = 1 << 63
_MASK = (1 << 64) - 1
_TERM = b"\x00\x01"  # end of a text/blob component; sorts before any escaped byte
_ESC = b"\x00\xff"  # an escaped 0x00 byte inside text/blob


def normalize(column: Column, value: CellValue) -> CellValue:
    """The stored form of ``value``: ints of double columns become floats.

    ``-0.0`` stays ``-0.0``: Cassandra serialises it as its own bytes, so it is
    a distinct key (sorting just below ``0.0``, as Java's ``Double.compare``)
    and a distinct value on a write-time tie.
    """
    if column.type == "double" and value is not None:
        return float(value)
    return value


def _encode_one(column: Column, value: CellValue) -> bytes:
    column.check(value)
    if value is None:
        raise SchemaError(column.name, "key columns cannot be null")
    return encode_checked_value(column, value)


def encode_checked_value(column: Column, value: CellValue) -> bytes:
    """``value`` of key column ``column`` encoded; it passed ``column.check`` and is not None."""
    t = column.type
    if t in ("bigint", "int"):
        return struct.pack(">Q", (value + _SIGN) & _MASK)  # type: ignore[operator]
    if t == "double":
        bits = struct.unpack(">Q", struct.pack(">d", normalize(column, value)))[0]
        bits = (~bits & _MASK) if bits & _SIGN else bits | _SIGN
        return struct.pack(">Q", bits)
    if t == "boolean":
        return b"\x01" if value else b"\x00"
    raw = value.encode("utf-8") if t == "text" else bytes(value)  # type: ignore[union-attr, arg-type]
    return raw.replace(b"\x00", _ESC) + _TERM


def encode_key(columns: Sequence[Column], values: Sequence[CellValue]) -> bytes:
    """Encode ``values`` of the leading ``columns`` (a prefix is allowed); raise SchemaError."""
    if len(values) > len(columns):
        raise SchemaError("key", f"{len(values)} values for {len(columns)} key columns")
    if len(values) == 1:
        return _encode_one(columns[0], values[0])
    return b"".join([_encode_one(c, v) for c, v in zip(columns, values, strict=False)])


def encode_checked_key(schema: TableSchema, key: Mapping[str, CellValue]) -> tuple[bytes, bytes]:
    """``(partition key, clustering key)`` of a full primary ``key`` that already passed
    ``schema.check_key`` (so no value is checked again)."""
    pk = b"".join([encode_checked_value(c, key[c.name]) for c in schema.partition_key])
    ck = b"".join([encode_checked_value(c, key[c.name]) for c in schema.clustering_key])
    return pk, ck


def decode_key(columns: Sequence[Column], data: bytes) -> tuple[CellValue, ...]:
    """The values encoded by ``encode_key(columns, ...)`` for all ``columns``."""
    out: list[CellValue] = []
    pos = 0
    for c in columns:
        t = c.type
        if t in ("bigint", "int", "double"):
            (bits,) = struct.unpack_from(">Q", data, pos)
            pos += 8
            if t == "double":
                bits = bits & ~_SIGN if bits & _SIGN else ~bits & _MASK
                out.append(struct.unpack(">d", struct.pack(">Q", bits))[0])
            else:
                out.append(bits - _SIGN)
        elif t == "boolean":
            out.append(data[pos] == 1)
            pos += 1
        else:
            parts = []
            while True:  # up to each 0x00: an escaped 0x00 (0x00 0xff) or the end (0x00 0x01)
                zero = data.find(0, pos)
                if zero < 0 or zero + 1 >= len(data):
                    raise ValueError("unterminated text or blob in the key")
                parts.append(data[pos:zero])
                pos = zero + 2
                if data[zero + 1] == 0x01:
                    break
                parts.append(b"\x00")
            raw = b"".join(parts)
            out.append(raw.decode("utf-8") if t == "text" else raw)
    if pos != len(data):
        raise ValueError("trailing bytes after the key")
    return tuple(out)


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string starting with ``prefix`` (None: no bound)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def partition_hash(encoded_partition_key: bytes) -> int:
    """A stable 63-bit hash of an encoded partition key (first 8 bytes of its SHA-1)."""
    return int.from_bytes(hashlib.sha1(encoded_partition_key).digest()[:8], "big") >> 1
