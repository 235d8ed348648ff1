"""A model of the join rules for the tests' oracles, written from the README ("Lookups and joins")
and apart from ``framework.state``: the entry order, the write version of a joined mapping and
Cassandra's rule between two live text cells."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

Value = Mapping[str, Any]


def value_bytes(value: Value) -> bytes:
    """Sorted keys, no spaces, no ``\\u`` escapes, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def rank(value: Value) -> int:
    """The first byte of the value's one-byte BLAKE2b digest."""
    return hashlib.blake2b(value_bytes(value), digest_size=1).digest()[0]


def entry_order(version: int, value: Value) -> tuple[int, int, bytes]:
    """Higher version first, then higher rank, then larger bytes."""
    return (version, rank(value), value_bytes(value))


def final_entry(entries: Iterable[tuple[int, Value]]) -> tuple[int, Value] | None:
    """The entry a key keeps of all it was sent: the largest ``entry_order``."""
    best = None
    for version, value in entries:
        if best is None or entry_order(version, value) > entry_order(*best):
            best = (version, value)
    return best


def join_version(event_version: int, entries: Iterable[tuple[int, Value]]) -> int:
    """``M + 256 * spread(y) + ranks`` within ``0..2**63-1`` (the event's own version when it
    read nothing)."""
    read = list(entries)
    if not read:
        return event_version
    top = max([event_version] + [v for v, _ in read])
    y = sum(v - event_version for v, _ in read)
    if -4096 <= y <= 4096:
        spread = y + 4096
    elif y > 4096:
        spread = 8192 + (y - 4096) // 2**20
    else:
        spread = (y + 4096) // 2**20
    return min(2**63 - 1, max(0, top + 256 * spread + sum(rank(value) for _, value in read)))


def cell_winner(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    """Of two live text cells ``(value, write time)``: the later write, on a tie the larger UTF-8."""
    return max(a, b, key=lambda c: (c[1], c[0].encode("utf-8")))
