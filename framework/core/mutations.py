"""Mutations: the only things a mapping may emit.

Every mutation carries a ``version`` (integer microseconds of the source's
modification time) that becomes the write time of each cell, so applying the
same mutations again, twice or in another order gives the same stored state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from framework.core.errors import BadMessage

__all__ = [
    "Upsert",
    "Delete",
    "LogState",
    "Mutation",
    "MutationError",
    "CellValue",
    "check_identifier",
    "check_version",
    "checked_upsert",
    "MAX_VERSION",
    "MAX_TEXT_BYTES",
]

#: A cell value: text, integer, float, boolean, bytes, or None (a cell tombstone).
CellValue: TypeAlias = str | int | float | bool | bytes | None

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")
#: Largest accepted version (fits a signed 64-bit Cassandra write time).
MAX_VERSION = 2**63 - 1
#: Largest text or blob cell accepted, in bytes.
MAX_TEXT_BYTES = 1 << 20
_MAX_INT = 2**63 - 1


class MutationError(BadMessage):
    """A mutation is malformed; ``field`` names the offending part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def check_identifier(name: object, what: str = "identifier") -> str:
    """Return ``name`` if it is a safe table or column name, else raise MutationError."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise MutationError(what, f"{name!r} is not an identifier ([A-Za-z][A-Za-z0-9_]{{0,47}})")
    return name


def check_version(value: object, what: str = "version") -> int:
    """Return ``value`` if it is a non-negative int64 version, else raise MutationError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MutationError(what, f"must be an integer (microseconds), got {type(value).__name__}")
    if value < 0 or value > MAX_VERSION:
        raise MutationError(what, f"must be in [0, 2**63-1], got {value}")
    return value


def check_value(value: object, what: str) -> CellValue:
    """Return ``value`` if it is a storable cell value, else raise MutationError."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_MAX_INT - 1 <= value <= _MAX_INT:
            raise MutationError(what, "integer outside the signed 64-bit range")
        return value
    if isinstance(value, float):
        if math.isnan(value):
            raise MutationError(what, "NaN is not a storable value")
        return value
    if isinstance(value, str):
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise MutationError(what, "text is not valid Unicode (lone surrogate)") from None
        if size > MAX_TEXT_BYTES:
            raise MutationError(what, f"text larger than {MAX_TEXT_BYTES} bytes")
        return value
    if isinstance(value, bytes):
        if len(value) > MAX_TEXT_BYTES:
            raise MutationError(what, f"blob larger than {MAX_TEXT_BYTES} bytes")
        return value
    raise MutationError(what, f"unsupported value type {type(value).__name__}")


#: Names that passed ``check_identifier`` (mutations repeat a few table and column names; capped).
_NAMES_SEEN: set[str] = set()
_NAMES_SEEN_MAX = 4096


def _check_name(name: object, what: str) -> None:
    """``check_identifier`` of a table or column name, remembered once passed (``_NAMES_SEEN``)."""
    if type(name) is not str or name not in _NAMES_SEEN:
        check_identifier(name, what if what == "table" else f"{what}.{name}")
        if len(_NAMES_SEEN) < _NAMES_SEEN_MAX:
            _NAMES_SEEN.add(name)  # type: ignore[arg-type]


def _frozen_map(raw: Mapping[str, Any], what: str, allow_none: bool) -> Mapping[str, CellValue]:
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a dict first: the ABC check is slow
        raise MutationError(what, f"must be a mapping, got {type(raw).__name__}")
    out: dict[str, CellValue] = {}
    for name, value in raw.items():
        _check_name(name, what)
        kind = type(value)
        if kind is str and value.isascii() and len(value) <= MAX_TEXT_BYTES:
            out[name] = value  # ASCII: no surrogate, as many bytes as characters
            continue
        checked = check_value(value, f"{what}.{name}")
        if checked is None and not allow_none:
            raise MutationError(f"{what}.{name}", "key columns cannot be null")
        out[name] = checked
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True)
class Upsert:
    """Write ``cells`` into the row ``key`` of ``table`` at write time ``version``.

    Per cell, the highest write time wins. A ``None`` cell writes a cell
    tombstone. ``ttl`` (seconds) makes the written cells expire.
    """

    table: str
    key: Mapping[str, CellValue]
    cells: Mapping[str, CellValue]
    version: int
    ttl: int | None = None

    def __post_init__(self) -> None:
        _check_name(self.table, "table")
        object.__setattr__(self, "key", _frozen_map(self.key, "key", allow_none=False))
        object.__setattr__(self, "cells", _frozen_map(self.cells, "cells", allow_none=True))
        if not self.key:
            raise MutationError("key", "must name at least one key column")
        if not self.cells:
            raise MutationError("cells", "must hold at least one cell")
        if not self.key.keys().isdisjoint(self.cells):
            overlap = sorted(set(self.key) & set(self.cells))
            raise MutationError("cells", f"key columns cannot be written as cells: {overlap}")
        check_version(self.version)
        if self.ttl is not None:
            if isinstance(self.ttl, bool) or not isinstance(self.ttl, int) or self.ttl <= 0:
                raise MutationError("ttl", f"must be a positive integer of seconds, got {self.ttl!r}")
            if self.ttl > 630_720_000:
                raise MutationError("ttl", "must be at most 20 years (Cassandra's limit)")


def checked_upsert(
    table: str, key: Mapping[str, CellValue], cells: Mapping[str, CellValue], version: int
) -> Upsert:
    """An ``Upsert`` (no TTL) built from parts that have passed its checks already, without
    checking them again: for the framework's own writes derived from checked mutations (a
    version mark: another mutation's key, one integer cell, its version)."""
    upsert = object.__new__(Upsert)
    put = object.__setattr__
    put(upsert, "table", table)
    put(upsert, "key", MappingProxyType(dict(key)))
    put(upsert, "cells", MappingProxyType(dict(cells)))
    put(upsert, "version", version)
    put(upsert, "ttl", None)
    return upsert


@dataclass(frozen=True, slots=True)
class Delete:
    """A tombstone at ``version``; what it covers depends on ``key`` and ``columns``.

    - ``key`` is the full primary key, ``columns`` None: a row tombstone over
      every cell of that row.
    - ``key`` is the full primary key, ``columns`` given: cell tombstones over
      those columns of that row only.
    - ``key`` names only the partition key of a table with clustering columns
      (``columns`` must be None): a partition tombstone over every row of the
      partition, as CQL ``DELETE FROM t WHERE <partition key>``.

    Any other key (a clustering prefix) is a ``SchemaError`` when applied. A
    tombstone shadows every write it covers with an equal or lower version,
    including writes that arrive after it; writes with a higher version stay.
    """

    table: str
    key: Mapping[str, CellValue]
    version: int
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_identifier(self.table, "table")
        object.__setattr__(self, "key", _frozen_map(self.key, "key", allow_none=False))
        if not self.key:
            raise MutationError("key", "must name at least one key column")
        check_version(self.version)
        if self.columns is not None:
            cols = tuple(self.columns)
            if not cols:
                raise MutationError("columns", "must be None (whole row) or non-empty")
            for c in cols:
                check_identifier(c, "columns")
            object.__setattr__(self, "columns", cols)


@dataclass(frozen=True, slots=True)
class LogState:
    """Append one state row to a state log.

    The row's clustering key is ``(at, event_id)``, so replaying the event
    rewrites the same row. Readers derive the current state from the whole log
    (see ``framework.core.state_log``); a transition is never stored.
    """

    table: str
    key: Mapping[str, CellValue]
    state: str
    at: int
    event_id: str
    version: int
    attrs: Mapping[str, CellValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_identifier(self.table, "table")
        object.__setattr__(self, "key", _frozen_map(self.key, "key", allow_none=False))
        object.__setattr__(self, "attrs", _frozen_map(self.attrs, "attrs", allow_none=True))
        if not self.key:
            raise MutationError("key", "must name at least one key column")
        reserved = {"at", "event_id", "state"}
        if reserved & (set(self.key) | set(self.attrs)):
            raise MutationError("attrs", f"{sorted(reserved)} are reserved log columns")
        if not isinstance(self.state, str) or not self.state:
            raise MutationError("state", "must be a non-empty string")
        check_version(self.at, "at")
        if not isinstance(self.event_id, str) or not self.event_id:
            raise MutationError("event_id", "must be a non-empty string")
        check_version(self.version)

    def as_upsert(self) -> Upsert:
        """The equivalent write of the log row."""
        return Upsert(
            self.table,
            {**self.key, "at": self.at, "event_id": self.event_id},
            {"state": self.state, **self.attrs},
            self.version,
        )


Mutation: TypeAlias = Upsert | Delete | LogState
