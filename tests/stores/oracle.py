"""An independent, deliberately plain model of the wide-column rules.

It replays a history sorted by version and keeps, per cell, the write that
Cassandra 4.x's rules say survives (``_beats``). It shares nothing with the
stores, not even the byte form values are compared in, so a store bug cannot
hide in it. ``tests.stores.test_cassandra_rules`` holds a second, finer model
(every delivery with its own clock).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from framework.core.mutations import Delete, LogState, Mutation, Upsert

RowKey = tuple[str, tuple[tuple[str, object], ...]]  # (table, sorted key items)


@dataclass(frozen=True)
class Write:
    """One write to one cell: value None means "deleted"; expires None means "never"."""

    value: object
    version: int
    expires: int | None


def _serialised(value: object) -> bytes:
    """The value as Cassandra serialises it (bigint, double, text, boolean, blob)."""
    if isinstance(value, bool):
        return bytes([value])
    if isinstance(value, int):
        return value.to_bytes(8, "big", signed=True)
    if isinstance(value, float):
        return struct.pack(">d", value)
    if isinstance(value, str):
        return value.encode("utf-8")
    assert isinstance(value, bytes)
    return value


def _tie_class(w: Write) -> int:
    """Cassandra 4.x ties (CASSANDRA-14592): deletion 2 > cell with a TTL 1 > cell without 0."""
    if w.value is None:
        return 2
    return 0 if w.expires is None else 1


def _beats(new: Write, old: Write) -> bool:
    """True when ``new`` replaces ``old`` under the rules."""
    if new.version != old.version:
        return new.version > old.version
    if _tie_class(new) != _tie_class(old):
        return _tie_class(new) > _tie_class(old)
    if new.value is None:
        return False  # two deletions: nothing to choose between
    if new.expires != old.expires:  # both expire: the later expiry first
        return new.expires > old.expires  # type: ignore[operator]
    return _serialised(new.value) > _serialised(old.value)


class Oracle:
    """Expected store contents after a history (every write made at clock ``write_clock``)."""

    def __init__(
        self,
        double_columns: Iterable[str],
        default_ttl: Mapping[str, int] | None = None,
        partition_keys: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.double_columns = set(double_columns)
        self.default_ttl = dict(default_ttl or {})
        #: partition key columns of the clustered tables: a Delete naming exactly them deletes the partition
        self.partition_keys = {t: set(cols) for t, cols in (partition_keys or {}).items()}

    def rows(
        self, history: Iterable[Mutation], write_clock: float, read_clock: float
    ) -> dict[RowKey, dict[str, tuple[object, int, int | None]]]:
        """Live rows: row key -> {column: (value, writetime, expires_at)}."""
        row_deleted_at: dict[RowKey, int] = {}
        partition_deleted_at: dict[RowKey, int] = {}  # (table, partition key items) -> version
        cells: dict[tuple[RowKey, str], Write] = {}
        now = int(write_clock // 1)
        for m in sorted(history, key=lambda m: m.version):
            if isinstance(m, LogState):
                key = {**m.key, "at": m.at, "event_id": m.event_id}
                m = Upsert(m.table, key, {"state": m.state, **m.attrs}, m.version)
            row = (m.table, tuple(sorted(m.key.items())))
            if isinstance(m, Delete) and m.columns is None and set(m.key) == self.partition_keys.get(m.table):
                partition_deleted_at[row] = max(partition_deleted_at.get(row, m.version), m.version)
                continue
            if isinstance(m, Delete) and m.columns is None:
                row_deleted_at[row] = max(row_deleted_at.get(row, m.version), m.version)
                continue
            if isinstance(m, Delete):
                writes = {c: Write(None, m.version, None) for c in m.columns}  # type: ignore[union-attr]
            else:
                ttl = m.ttl if m.ttl is not None else self.default_ttl.get(m.table)
                writes = {}
                for c, v in m.cells.items():
                    if v is not None and c in self.double_columns:
                        v = float(v)
                    expires = None if v is None or ttl is None else now + ttl
                    writes[c] = Write(v, m.version, expires)
            for c, w in writes.items():
                old = cells.get((row, c))
                if old is None or _beats(w, old):
                    cells[(row, c)] = w
        out: dict[RowKey, dict[str, tuple[object, int, int | None]]] = {}
        for (row, c), w in cells.items():
            if w.value is None:
                continue
            if row in row_deleted_at and w.version <= row_deleted_at[row]:
                continue
            part = (row[0], tuple(kv for kv in row[1] if kv[0] in self.partition_keys.get(row[0], ())))
            if part in partition_deleted_at and w.version <= partition_deleted_at[part]:
                continue
            if w.expires is not None and w.expires <= read_clock:
                continue
            out.setdefault(row, {})[c] = (w.value, w.version, w.expires)
        return out


def current_state(
    live: Mapping[RowKey, Mapping[str, tuple[object, int, int | None]]],
    table: str,
    partition: Mapping[str, object],
    precedence: tuple[str, ...],
) -> tuple[str, int, str, dict[str, object]] | None:
    """(state, at, event_id, attrs) of the entity's latest log row, or None."""
    best = None
    for (t, items), cols in live.items():
        key = dict(items)
        if t != table or any(key[k] != v for k, v in partition.items()) or "state" not in cols:
            continue
        state = cols["state"][0]
        rank = precedence.index(state) if state in precedence else -1
        candidate = ((key["at"], rank, key["event_id"]), state, cols)
        if best is None or candidate[0] > best[0]:
            best = candidate
    if best is None:
        return None
    (at, _, event_id), state, cols = best
    return state, at, event_id, {c: v[0] for c, v in cols.items() if c != "state"}  # type: ignore[return-value]
