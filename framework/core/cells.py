"""Cassandra's cell rules, in one place.

A cell holds a value (``None`` is a tombstone), its write time (the mutation's
version) and an optional expiry. Two versions of a cell reconcile as Cassandra
does: the higher write time wins; on a tie a tombstone wins, then the larger
serialised value, then the later expiry. Every embedded engine and every test
oracle uses these functions, so the rules exist once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from framework.core.mutations import CellValue

__all__ = ["Cell", "order_bytes", "reconcile", "is_live", "shadowed"]

#: Expiry used for cells without TTL (Cassandra's "no deletion time").
NO_EXPIRY = 2**62


@dataclass(frozen=True, slots=True)
class Cell:
    """One stored cell: value (None = tombstone), write time, expiry (epoch seconds)."""

    value: CellValue
    writetime: int
    expires_at: int | None = None


def order_bytes(value: CellValue) -> bytes:
    """The value's serialised form as Cassandra compares it on a write-time tie."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        return struct.pack(">q", value)
    if isinstance(value, float):
        return struct.pack(">d", value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    raise TypeError(f"not a cell value: {type(value).__name__}")


def _rank(cell: Cell) -> tuple[int, int, bytes, int]:
    dead = 1 if cell.value is None else 0
    expiry = NO_EXPIRY if cell.expires_at is None else cell.expires_at
    return (cell.writetime, dead, order_bytes(cell.value), expiry)


def reconcile(a: Cell, b: Cell) -> Cell:
    """The cell that survives when ``a`` and ``b`` are written to the same place."""
    return a if _rank(a) >= _rank(b) else b


def is_live(cell: Cell, now_s: float) -> bool:
    """True when the cell has a value and has not expired at ``now_s``."""
    if cell.value is None:
        return False
    return cell.expires_at is None or cell.expires_at > now_s


def shadowed(cell: Cell, tombstone_version: int | None) -> bool:
    """True when a row or partition tombstone at ``tombstone_version`` hides the cell."""
    return tombstone_version is not None and cell.writetime <= tombstone_version
