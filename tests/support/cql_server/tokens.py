"""Murmur3Partitioner tokens of partition keys, computed as Cassandra does."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from cassandra.murmur3 import murmur3

from framework.core.mutations import CellValue
from tests.support.cql_server.catalog import TableDef

__all__ = ["routing_key", "token", "MIN_TOKEN", "MAX_TOKEN"]

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1


def routing_key(table: TableDef, values: Sequence[CellValue]) -> bytes:
    """The serialised partition key: one column's bytes, or Cassandra's composite encoding."""
    parts = [table.cqltype(c).to_binary(v, 4) for c, v in zip(table.partition_key, values, strict=True)]
    if len(parts) == 1:
        return parts[0]
    return b"".join(struct.pack(">H", len(p)) + p + b"\x00" for p in parts)


def token(key: bytes) -> int:
    """The partition's token; Long.MIN_VALUE is normalised to MAX as the partitioner does."""
    h = int(murmur3(key))
    return MAX_TOKEN if h == MIN_TOKEN else h
