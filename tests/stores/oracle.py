"""An independent, deliberately plain model of the wide-column rules.

It replays a history sorted by version and keeps, per cell, the write that
the rules say survives. It shares nothing with the stores but ``order_bytes``
(the byte form values are compared in), so a store bug cannot hide in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from framework.core.cells import order_bytes
from framework.core.mutations import Delete, LogState, Mutation, Upsert

RowKey = tuple[str, tuple[tuple[str, object], ...]]  # (table, sorted key items)


@dataclass(frozen=True)
class Write:
    """One write to one cell: value None means "deleted"; expires None means "never"."""

    value: object
    version: int
    expires: int | None


def _beats(new: Write, old: Write) -> bool:
    """True when ``new`` replaces ``old`` under the rules."""
    if new.version != old.version:
        return new.version > old.version
    # Same version: a deletion wins over a value.
    if (new.value is None) != (old.value is None):
        return new.value is None
    # Then the larger serialised value.
    if order_bytes(new.value) != order_bytes(old.value):  # type: ignore[arg-type]
        return order_bytes(new.value) > order_bytes(old.value)  # type: ignore[arg-type]
    # Then the later expiry; "never expires" is the latest of all.
    new_exp = float("inf") if new.expires is None else new.expires
    old_exp = float("inf") if old.expires is None else old.expires
    return new_exp > old_exp


class Oracle:
    """Expected store contents after a history (every write made at clock ``write_clock``)."""

    def __init__(self, double_columns: Iterable[str], default_ttl: Mapping[str, int] | None = None) -> None:
        self.double_columns = set(double_columns)
        self.default_ttl = dict(default_ttl or {})

    def rows(
        self, history: Iterable[Mutation], write_clock: float, read_clock: float
    ) -> dict[RowKey, dict[str, tuple[object, int, int | None]]]:
        """Live rows: row key -> {column: (value, writetime, expires_at)}."""
        row_deleted_at: dict[RowKey, int] = {}
        cells: dict[tuple[RowKey, str], Write] = {}
        now = int(write_clock // 1)
        for m in sorted(history, key=lambda m: m.version):
            if isinstance(m, LogState):
                key = {**m.key, "at": m.at, "event_id": m.event_id}
                m = Upsert(m.table, key, {"state": m.state, **m.attrs}, m.version)
            row = (m.table, tuple(sorted(m.key.items())))
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
