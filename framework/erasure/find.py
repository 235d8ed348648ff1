"""Finding a subject's data: its rows in the store, and the value in any text (the residue test).

Rows are found per declared table: a partition read when the declaration
has a ``key_column``, else one scan of the table testing every row against
all declarations of the subject's kind on it. A scan reads every live row
(on the embedded SQLite store about 10^5 rows/s: see BENCHMARKS.md
"Erasure"), so an app with a large table and a frequent need should declare
a table keyed by the subject.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.mutations import MAX_VERSION, CellValue, Delete
from framework.core.rows import Row
from framework.dlq.record import ParkedRecord
from framework.erasure.declare import _AFTER, _BEFORE, PersonalData, Subject

__all__ = ["Found", "find_rows", "declared_for", "finder", "record_finder"]

Key = dict[str, CellValue]


def declared_for(app: Any, kind: str) -> list[PersonalData]:
    """The app's declarations of ``kind``; ValueError naming the declared kinds when none."""
    declared: Sequence[PersonalData] = getattr(app, "personal_data", ())
    mine = [d for d in declared if d.kind == kind]
    if not mine:
        kinds = sorted({d.kind for d in declared})
        raise ValueError(f"app {app.name} declares no personal data of kind {kind!r} (kinds: {kinds})")
    return mine


@dataclass
class Found:
    """The subject's rows: one delete per row (a row delete, or cell tombstones), rows scanned."""

    deletes: dict[tuple[str, str], Delete] = field(default_factory=dict)
    scanned: int = 0

    def add(self, d: PersonalData, row: Row) -> None:
        ident = (d.table, json.dumps(_plain(row.key), sort_keys=True))
        seen = self.deletes.get(ident)
        columns = d.erase
        if seen is not None:
            if seen.columns is None or columns is None:
                columns = None
            else:
                columns = tuple(dict.fromkeys((*seen.columns, *columns)))
        self.deletes[ident] = Delete(d.table, dict(row.key), MAX_VERSION, columns=columns)


def _plain(key: Any) -> dict[str, Any]:
    return {k: v.hex() if isinstance(v, bytes) else v for k, v in key.items()}


async def find_rows(store: Any, app: Any, subject: Subject) -> Found:
    """Every row holding ``subject`` under the app's declarations of its kind."""
    found = Found()
    by_table: dict[str, list[PersonalData]] = {}
    for d in declared_for(app, subject.kind):
        by_table.setdefault(d.table, []).append(d)
    for table, decls in by_table.items():
        keyed = [d for d in decls if d.key_column is not None]
        for d in keyed:
            assert d.key_column is not None
            for row in await store.read_partition(table, {d.key_column: d.norm(subject.value)}):
                found.scanned += 1
                found.add(d, row)
        scanned = [d for d in decls if d.key_column is None]
        if not scanned:
            continue
        values = [(d, d.norm(subject.value)) for d in scanned]
        async for row in store.scan(table):
            found.scanned += 1
            cells = row.values()
            for d, value in values:
                if d.holds(cells, value):
                    found.add(d, row)
    return found


def finder(value: str) -> Callable[[str], bool]:
    """``mentions(text, value)`` with the pattern compiled once and a cheap substring pre-check."""
    folded = value.casefold()
    pattern = re.compile(_BEFORE + re.escape(value) + _AFTER, re.IGNORECASE)

    def find(text: str) -> bool:
        return folded in text.casefold() and pattern.search(text) is not None

    return find


def _texts(raw: bytes | None) -> list[str]:
    if raw is None:
        return []
    text = raw.decode("utf-8", "replace")
    out = [text]
    try:
        out.append(json.dumps(json.loads(text), ensure_ascii=False))  # JSON escapes undone
    except (ValueError, RecursionError):
        pass
    return out


def record_finder(value: str) -> Callable[[ParkedRecord], bool]:
    """True for a parked record whose key, value (raw or JSON-decoded) or error mentions ``value``."""
    find = finder(value)

    def matches(rec: ParkedRecord) -> bool:
        return any(find(t) for t in (*_texts(rec.key), *_texts(rec.value), rec.error))

    return matches
