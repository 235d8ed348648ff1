"""Response bodies of protocol v4: READY, SUPPORTED, ERROR and the RESULT kinds.

Value and type encoding reuse the driver's ``cassandra.protocol`` writers and
``cassandra.cqltypes`` classes; the message layout is written here because
the driver's message classes only decode responses.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from cassandra import cqltypes
from cassandra.protocol import (
    write_int,
    write_short,
    write_string,
    write_stringmultimap,
    write_value,
)

from tests.support.cql_server.catalog import ColumnSpec
from tests.support.cql_server.errors import CqlError

__all__ = [
    "OP_ERROR",
    "OP_READY",
    "OP_SUPPORTED",
    "OP_RESULT",
    "Result",
    "Void",
    "Rows",
    "SetKeyspace",
    "Prepared",
    "SchemaChange",
    "supported",
    "error",
    "type_option",
]

OP_ERROR, OP_READY, OP_SUPPORTED, OP_RESULT = 0x00, 0x02, 0x06, 0x08
_KIND_VOID, _KIND_ROWS, _KIND_SET_KEYSPACE, _KIND_PREPARED, _KIND_SCHEMA_CHANGE = 1, 2, 3, 4, 5
_GLOBAL_TABLES_SPEC, _HAS_MORE_PAGES, _NO_METADATA = 0x0001, 0x0002, 0x0004

_SIMPLE_CODES: dict[type, int] = {
    cqltypes.AsciiType: 0x0001,
    cqltypes.LongType: 0x0002,
    cqltypes.BytesType: 0x0003,
    cqltypes.BooleanType: 0x0004,
    cqltypes.DoubleType: 0x0007,
    cqltypes.FloatType: 0x0008,
    cqltypes.Int32Type: 0x0009,
    cqltypes.DateType: 0x000B,
    cqltypes.UUIDType: 0x000C,
    cqltypes.UTF8Type: 0x000D,  # protocol v3+ sends text as varchar
    cqltypes.VarcharType: 0x000D,
    cqltypes.InetAddressType: 0x0010,
}


def type_option(f: io.BytesIO, t: type) -> None:
    """Write the [option] of type ``t`` (simple types, list, set, map)."""
    for collection, code in (
        (cqltypes.ListType, 0x0020),
        (cqltypes.MapType, 0x0021),
        (cqltypes.SetType, 0x0022),
    ):
        if isinstance(t, type) and issubclass(t, collection):
            write_short(f, code)
            for sub in t.subtypes:  # type: ignore[attr-defined]
                type_option(f, sub)
            return
    try:
        write_short(f, _SIMPLE_CODES[t])
    except KeyError:
        raise TypeError(f"no protocol type code for {t!r}") from None


def _metadata(f: io.BytesIO, specs: Sequence[ColumnSpec], flags: int = 0, paging_state: bytes | None = None,
              pk_indexes: Sequence[int] | None = None) -> None:  # fmt: skip
    """Column metadata (rows metadata when ``pk_indexes`` is None, else prepared bind metadata)."""
    global_spec = len({(s.keyspace, s.table) for s in specs}) == 1
    if global_spec:
        flags |= _GLOBAL_TABLES_SPEC
    if paging_state is not None:
        flags |= _HAS_MORE_PAGES
    write_int(f, flags)
    write_int(f, len(specs))
    if pk_indexes is not None:
        write_int(f, len(pk_indexes))
        for i in pk_indexes:
            write_short(f, i)
    if paging_state is not None:
        write_int(f, len(paging_state))
        f.write(paging_state)
    if flags & _NO_METADATA:
        return
    if global_spec:
        write_string(f, specs[0].keyspace)
        write_string(f, specs[0].table)
    for s in specs:
        if not global_spec:
            write_string(f, s.keyspace)
            write_string(f, s.table)
        write_string(f, s.name)
        type_option(f, s.cqltype)


class Result:
    """A RESULT message body."""

    def body(self) -> bytes:
        raise NotImplementedError


@dataclass(frozen=True)
class Void(Result):
    def body(self) -> bytes:
        return _KIND_VOID.to_bytes(4, "big")


@dataclass(frozen=True)
class Rows(Result):
    """Rows of encoded values; ``paging_state`` when more pages follow; ``no_metadata`` on request."""

    specs: tuple[ColumnSpec, ...]
    rows: tuple[tuple[bytes | None, ...], ...]
    paging_state: bytes | None = None
    no_metadata: bool = False

    def body(self) -> bytes:
        if not self.specs:
            raise ValueError("a Rows result must declare at least one column")
        f = io.BytesIO()
        write_int(f, _KIND_ROWS)
        _metadata(f, self.specs, _NO_METADATA if self.no_metadata else 0, self.paging_state)
        write_int(f, len(self.rows))
        for row in self.rows:
            for value in row:
                write_value(f, value)
        return f.getvalue()


@dataclass(frozen=True)
class SetKeyspace(Result):
    keyspace: str

    def body(self) -> bytes:
        f = io.BytesIO()
        write_int(f, _KIND_SET_KEYSPACE)
        write_string(f, self.keyspace)
        return f.getvalue()


@dataclass(frozen=True)
class Prepared(Result):
    """The id, bind-marker metadata (with partition key indexes) and result metadata of a statement."""

    query_id: bytes
    binds: tuple[ColumnSpec, ...]
    pk_indexes: tuple[int, ...]
    result: tuple[ColumnSpec, ...]

    def body(self) -> bytes:
        f = io.BytesIO()
        write_int(f, _KIND_PREPARED)
        write_short(f, len(self.query_id))
        f.write(self.query_id)
        _metadata(f, self.binds, pk_indexes=self.pk_indexes)
        _metadata(f, self.result, 0 if self.result else _NO_METADATA)
        return f.getvalue()


@dataclass(frozen=True)
class SchemaChange(Result):
    """CREATED/UPDATED/DROPPED of a KEYSPACE or TABLE."""

    change: str
    target: str
    keyspace: str
    name: str | None = None

    def body(self) -> bytes:
        f = io.BytesIO()
        write_int(f, _KIND_SCHEMA_CHANGE)
        write_string(f, self.change)
        write_string(f, self.target)
        write_string(f, self.keyspace)
        if self.target != "KEYSPACE":
            write_string(f, self.name or "")
        return f.getvalue()


def supported(options: dict[str, list[str]]) -> bytes:
    f = io.BytesIO()
    write_stringmultimap(f, options)
    return f.getvalue()


def error(err: CqlError) -> bytes:
    f = io.BytesIO()
    write_int(f, err.code)
    write_string(f, err.message)
    f.write(err.extra())
    return f.getvalue()
