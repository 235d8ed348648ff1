"""A model of the join rules for the tests' oracles, written from the docs ("Lookups and joins")
and apart from ``framework.state``: the entry order, the write version of a joined mapping
(``At``: the event's version plus at most one per entry change) and Cassandra's rule between two
live text cells."""

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


class At:
    """A joined write as the README's version rule promises it: ``value`` written at the event's
    version ``e`` plus at most one per entry change (``slack``: the entry events of the history
    bound them). Equal to an actual ``(value, write time)`` within those bounds."""

    __slots__ = ("value", "e", "slack")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any, e: int, slack: int) -> None:
        self.value, self.e, self.slack = value, e, slack

    def __eq__(self, other: object) -> bool:
        if isinstance(other, At):
            return (self.value, self.e, self.slack) == (other.value, other.e, other.slack)
        if isinstance(other, tuple) and len(other) == 2:
            return bool(other[0] == self.value and self.e <= other[1] <= self.e + self.slack)
        return NotImplemented

    def __repr__(self) -> str:
        return f"At({self.value!r}, {self.e}..{self.e + self.slack})"


class Near:
    """A joined write time as the version rule promises it: the event's version ``e`` plus at
    most ``slack`` (one per entry change). Equal to an int within those bounds."""

    __slots__ = ("e", "slack")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, e: int, slack: int) -> None:
        self.e, self.slack = e, slack

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            return self.e <= other <= self.e + self.slack
        return NotImplemented

    def __repr__(self) -> str:
        return f"Near({self.e}..{self.e + self.slack})"


def joined_cell(a: At, b: At) -> At:
    """Of two events' joined writes of one cell: the later event's (the model's in-order pass),
    on equal versions the larger UTF-8 value. Exact when the versions lie more than the slack
    apart (the README's limit); callers keep closer pairs out."""
    return max(a, b, key=lambda c: (c.e, str(c.value).encode("utf-8")))


def cell_winner(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    """Of two live text cells ``(value, write time)``: the later write, on a tie the larger UTF-8."""
    return max(a, b, key=lambda c: (c[1], c[0].encode("utf-8")))
