"""Finding a subject's data: its rows in the store, and the value in any text (the residue test).

Every lookup compares normalised forms: a row is the subject's when its
key (``key_column``) or a declared cell, normalised, equals the subject's
value normalised, so an erasure given any spelling finds rows written with
any other. Rows are found per declared table: a partition read when every
declaration of the kind on it is keyed by the subject without a
normalisation (the spelling given is then the only one), else one scan of
the table testing every row against all of them (a normalised key may be
stored under any spelling that normalises to it). A scan reads every live row
(on the embedded SQLite store about 10^5 rows/s: see BENCHMARKS.md
"Erasure"), so an app with a large table and a frequent need should declare
a table keyed by the subject's normalised value, without ``normalize``,
and write its keys normalised.

An app with ID mutation also keeps the values of the cells it moved or
dropped in ``converge_id_routes``: ``find_records`` reads that table and
returns a row delete at ``MAX_VERSION`` for every record of a cell the
declarations withhold (``framework.idmutation.routes.erased_records``): one
scan of that table, then one read of each partition holding the value.
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
from framework.idmutation.routes import ROUTES_TABLE, erased_records

__all__ = ["Found", "find_rows", "find_records", "declared_for", "spellings", "finder", "record_finder"]

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


def _keyed(d: PersonalData, key: Any, value: str) -> bool:
    """True when ``d`` is keyed by the subject and the row's key, normalised, is ``value``."""
    k = key.get(d.key_column) if d.key_column is not None else None
    return isinstance(k, str) and d.norm(k) == value


async def find_rows(store: Any, app: Any, subject: Subject) -> Found:
    """Every row holding ``subject``, in any spelling, under the app's declarations of its kind."""
    found = Found()
    by_table: dict[str, list[PersonalData]] = {}
    for d in declared_for(app, subject.kind):
        by_table.setdefault(d.table, []).append(d)
    schemas = {t.name: t for t in app.tables}
    for table, decls in by_table.items():
        values = [(d, d.norm(subject.value)) for d in decls]
        whole = [c.name for c in schemas[table].partition_key] if table in schemas else []
        if all([d.key_column] == whole and d.normalize is None and not d.columns for d in decls):
            for d, value in values:
                assert d.key_column is not None
                for row in await store.read_partition(table, {d.key_column: value}):
                    found.scanned += 1
                    found.add(d, row)
            continue
        async for row in store.scan(table):
            found.scanned += 1
            cells = row.values()
            for d, value in values:
                if _keyed(d, row.key, value) or d.holds(cells, value):
                    found.add(d, row)
    return found


async def find_records(store: Any, app: Any, subject: Subject) -> list[Delete]:
    """Row deletes (at ``MAX_VERSION``) of every ``converge_id_routes`` record of a cell holding
    ``subject`` under the app's declarations (a whole row's records for a row declaration); none
    when the app has no ID mutation or declares no owner table."""
    config = getattr(app, "id_mutation", None)
    decls = declared_for(app, subject.kind)
    if config is None or not any(config.column(d.table) is not None for d in decls):
        return []
    by_table: dict[str, list[PersonalData]] = {}
    for d in decls:
        by_table.setdefault(d.table, []).append(d)

    def verdict(table: str, cells: Any) -> tuple[bool, frozenset[str]] | None:
        found: tuple[bool, frozenset[str]] | None = None
        for d in by_table.get(table, ()):
            if d.holds(cells, d.norm(subject.value)):
                whole, columns = found or (False, frozenset())
                found = (whole or d.erase is None, columns | set(d.erase or ()) | set(d.columns))
        return found

    await store.ensure_table(ROUTES_TABLE)
    origins: set[tuple[Any, Any]] = set()  # partitions holding a record of the subject's value
    async for row in store.scan(ROUTES_TABLE.name):
        value = row.cells["value"].value if "value" in row.cells else None
        if row.key["tbl"] in by_table and isinstance(value, str) and value[:1] == "s":
            if verdict(str(row.key["tbl"]), {str(row.key["col"]): value[1:]}) is not None:
                origins.add((row.key["tenant"], row.key["origin"]))
    out: list[Delete] = []
    for tenant, origin in sorted(origins):
        rows = await store.read_partition(ROUTES_TABLE.name, {"tenant": tenant, "origin": origin})
        records = [(r.key, r.cells["value"].value if "value" in r.cells else None) for r in rows]
        withheld = erased_records(records, verdict)
        out += [Delete(ROUTES_TABLE.name, dict(r.key), MAX_VERSION) for r in rows if withheld(r.key)]
    return out


def spellings(app: Any, subject: Subject) -> tuple[str, ...]:
    """The subject's value as given and as its kind normalises it (one when they are equal)."""
    return tuple(dict.fromkeys((subject.value, declared_for(app, subject.kind)[0].norm(subject.value))))


def finder(*values: str) -> Callable[[str], bool]:
    """True for a text that ``mentions`` one of ``values``: patterns compiled once, a cheap
    substring pre-check."""
    tests = [(v.casefold(), re.compile(_BEFORE + re.escape(v) + _AFTER, re.IGNORECASE)) for v in values if v]

    def find(text: str) -> bool:
        folded = text.casefold()
        return any(v in folded and pattern.search(text) is not None for v, pattern in tests)

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


def record_finder(*values: str) -> Callable[[ParkedRecord], bool]:
    """True for a parked record whose key, value (raw or JSON-decoded) or error mentions one of ``values``."""
    find = finder(*values)

    def matches(rec: ParkedRecord) -> bool:
        return any(find(t) for t in (*_texts(rec.key), *_texts(rec.value), rec.error))

    return matches
