"""Cassandra's cell rules, in one place.

A cell holds a value (``None`` is a tombstone), its write time (the mutation's
version) and an optional expiry. Two versions of a cell reconcile as Cassandra
4.x does (``Cells.resolveRegular``, with the CASSANDRA-14592 tie rules):

1. the higher write time wins;
2. on a write-time tie, a tombstone beats an expiring cell, which beats a live
   cell without TTL (a cell that will expire counts as a future tombstone, so
   the outcome never depends on the clock at reconcile time);
3. between two expiring cells, the later expiry wins;
4. only then the value decides: the greater serialised value (unsigned bytes,
   big-endian; so ``-0.0`` beats ``2.5``) wins.

Cassandra also orders two tombstones of a tie by their deletion time; a
tombstone has no value, so which one is kept changes nothing that is read.
Every embedded engine uses these functions (the SQLite engine's SQL upsert
states the same order), so the rules exist once.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.core.mutations import CellValue

__all__ = ["Cell", "order_bytes", "reconcile", "rank", "is_live", "shadowed"]

# The tie classes of rule 2, lowest to highest.
_LIVE, _EXPIRING, _TOMBSTONE = 0, 1, 2


@dataclass(frozen=True, slots=True, init=False)
class Cell:
    """One stored cell: value (None = tombstone), write time, expiry (epoch seconds)."""

    value: CellValue
    writetime: int
    expires_at: int | None = None

    def __init__(self, value: CellValue, writetime: int, expires_at: int | None = None) -> None:
        # The slots are set directly: a frozen dataclass's own __init__ goes through
        # object.__setattr__ per field, about four times slower, and stores make a cell per cell read.
        _SET_VALUE(self, value)
        _SET_WRITETIME(self, writetime)
        _SET_EXPIRES_AT(self, expires_at)


_SET_VALUE, _SET_WRITETIME, _SET_EXPIRES_AT = (
    Cell.__dict__[name].__set__ for name in ("value", "writetime", "expires_at")
)


#: ``order_bytes`` per value type (bool before int: it is a subclass of int).
_ORDER_BY_TYPE: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda v: b"",
    bool: lambda v: b"\x01" if v else b"\x00",
    int: struct.Struct(">q").pack,
    float: struct.Struct(">d").pack,
    str: lambda v: v.encode("utf-8"),
    bytes: lambda v: v,
}


def order_bytes(value: CellValue) -> bytes:
    """The value's serialised form as Cassandra compares it on a write-time tie.

    Doubles keep their sign: ``-0.0`` is ``0x80 00 ..`` and differs from ``0.0``.
    """
    encode = _ORDER_BY_TYPE.get(type(value))
    if encode is None:  # a subclass (an IntEnum, a str enum): the first type it is an instance of
        encode = next((f for t, f in _ORDER_BY_TYPE.items() if isinstance(value, t)), None)
        if encode is None:
            raise TypeError(f"not a cell value: {type(value).__name__}")
    return encode(value)


def rank(cell: Cell) -> tuple[int, int, int, bytes]:
    """The cell's place in the reconcile order: the higher rank survives.

    (write time, tie class [live < expiring < tombstone], expiry of an
    expiring cell else 0, serialised value).
    """
    if cell.value is None:
        return (cell.writetime, _TOMBSTONE, 0, b"")
    if cell.expires_at is None:
        return (cell.writetime, _LIVE, 0, order_bytes(cell.value))
    return (cell.writetime, _EXPIRING, cell.expires_at, order_bytes(cell.value))


def reconcile(a: Cell, b: Cell) -> Cell:
    """The cell that survives when ``a`` and ``b`` are written to the same place."""
    if a.writetime != b.writetime:  # the rank's first element decides; no value serialised
        return a if a.writetime > b.writetime else b
    return a if rank(a) >= rank(b) else b


def is_live(cell: Cell, now_s: float) -> bool:
    """True when the cell has a value and has not expired at ``now_s``."""
    if cell.value is None:
        return False
    return cell.expires_at is None or cell.expires_at > now_s


def shadowed(cell: Cell, tombstone_version: int | None) -> bool:
    """True when a row or partition tombstone at ``tombstone_version`` hides the cell."""
    return tombstone_version is not None and cell.writetime <= tombstone_version
