"""Where ID mutation put each cell it moved or dropped, so a later map can route it again.

Every cell that ID mutation takes away from the id it was written under (the
stream's resolution, the job's moves) is recorded in ``converge_id_routes``,
partition ``(tenant, origin)`` (``origin``: the id the cell was written
under), clustering ``(tbl, row, col, version, placed)``:

- the *value row* (``placed = ''``): the cell's value (typed JSON) at the
  cell's own version and with its TTL; a dropped write (final id deleted)
  keeps only this row: it is kept durably, not discarded;
- one *placement row* per id the cell was ever written under (``live``),
  with ``gone`` once a cell tombstone at the cell's version was written
  there (the job moved it away, or the origin after the job moved it).

When an id's entry changes, ``reroute`` recomputes the final id of each
recorded cell from its origin and version (``final_of``: the same rule as
the stream) and, where it differs from the placements, writes a cell
tombstone under every other placement and the value under the final id.
Records are written at the cell's version, with the same content by every
writer, so replays and repeated runs write the same rows.

Erasure (``framework.erasure``) reaches the records: ``erased_records`` tells,
from a verdict on each recorded row's cells, which records belong to an
erased subject's cells; the erasure deletes them, the stream's screen drops
them with the write they record, and ``reroute`` given the screen's verdict
skips them and deletes them, so no request routes an erased subject back.
``record_texts`` gives the values a record holds, for ``erase verify``.

What cannot converge (counted as ``unconverged`` and logged):

- a cell whose final id becomes an id where a tombstone at the cell's own
  version was already written (a final that flips back to an id it was moved
  away from, its origin included): the tombstone wins the tie;
- a recorded tombstone (an app's ``Delete``, a ``None`` cell) moved away
  from a placement: the tombstone stays there and shadows that row's older
  cells.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from framework.core.mutations import MAX_VERSION, CellValue, Delete, LogState, Mutation, Upsert
from framework.core.rows import Row, cell_int
from framework.core.schema import Column, TableSchema
from framework.idmutation.collapse import Interval, final_of
from framework.idmutation.declare import OwnerColumn, id_value

__all__ = [
    "ROUTES_TABLE",
    "RouteReport",
    "cell_records",
    "row_text",
    "mutation_records",
    "reroute",
    "encode_value",
    "decode_value",
    "Verdict",
    "erased_records",
    "record_texts",
]

log = logging.getLogger("framework.idmutation")

ROUTES_TABLE = TableSchema(
    name="converge_id_routes",
    partition_key=(Column("tenant", "text"), Column("origin", "text")),
    clustering_key=(
        Column("tbl", "text"),
        Column("row", "text"),
        Column("col", "text"),
        Column("version", "bigint"),
        Column("placed", "text"),
    ),
    columns=(Column("value", "text"), Column("live", "boolean"), Column("gone", "boolean")),
)
#: The encoded value of a recorded tombstone (a ``Delete``: ``col`` '' for a row or partition).
_TOMBSTONE = "d"
_NONE = "n"


#: ``verdict(table, cells)``: None when the cells of one row of ``table`` hold no erased subject,
#: else ``(whole row, columns)``: what of that row must go (``SubjectScreen.verdict``).
Verdict = Callable[[str, Mapping[str, CellValue]], tuple[bool, frozenset[str]] | None]
#: A record as ``erased_records`` reads it: its key and its ``value`` cell (None for a placement).
Record = tuple[Mapping[str, CellValue], CellValue]


@dataclass
class RouteReport:
    """What ``reroute`` changed: cells written under a new final id, and the cells that cannot
    converge (see the module docstring), each also logged at warning."""

    rerouted: int = 0
    unconverged: int = 0
    #: ``(table, key)`` of every owner row written (old placements and new finals)
    touched: list[tuple[str, dict[str, CellValue]]] = field(default_factory=list)


def encode_value(value: CellValue) -> str:
    """A cell value as text: its kind (one letter) then its value (``n``: None, a cell tombstone);
    text is kept as it is, so a record is about the size of its cell."""
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value!r}"
    if isinstance(value, bytes):
        return "x" + base64.b64encode(value).decode("ascii")
    return "s" + value


def decode_value(text: str) -> CellValue:
    """``encode_value`` inverted (ValueError for a recorded tombstone)."""
    kind, rest = text[:1], text[1:]
    if kind == "s":
        return rest
    if kind == "i":
        return int(rest)
    if kind == "n":
        return None
    if kind == "b":
        return rest == "1"
    if kind == "f":
        return float(rest)
    if kind == "x":
        return base64.b64decode(rest)
    raise ValueError(f"not a recorded cell value: {text[:40]!r}")


def _row_of(key: Mapping[str, CellValue]) -> tuple[CellValue, ...]:
    return (key["tenant"], key["origin"], key["tbl"], key["row"])


def erased_records(records: Iterable[Record], verdict: Verdict) -> Callable[[Mapping[str, CellValue]], bool]:
    """A test of record keys: True for a record of a cell that ``verdict`` withholds. Every recorded
    value of one row (one origin, any version) is judged with the other cells of its version, and a
    row's verdicts add up, so a cell is withheld when any version of its row held the subject."""
    versions: dict[tuple[CellValue, ...], dict[CellValue, dict[str, CellValue]]] = {}
    for key, value in records:
        if key.get("placed") != "" or not isinstance(value, str) or value[:1] in (_TOMBSTONE, _NONE):
            continue
        cells = versions.setdefault(_row_of(key), {}).setdefault(key["version"], {})
        cells[str(key["col"])] = decode_value(value)
    withheld: dict[tuple[CellValue, ...], tuple[bool, frozenset[str]]] = {}
    for row, by_version in versions.items():
        for cells in by_version.values():
            found = verdict(str(row[2]), cells)
            if found is not None:
                whole, columns = withheld.get(row, (False, frozenset()))
                withheld[row] = (whole or found[0], columns | found[1])

    def test(key: Mapping[str, CellValue]) -> bool:
        found = withheld.get(_row_of(key))
        return found is not None and (found[0] or key["col"] in found[1])

    return test


def record_texts(key: Mapping[str, CellValue], value: CellValue) -> list[str]:
    """The texts a record holds, decoded (its row's key values and its cell value): what
    ``erase verify`` searches, since the stored forms carry a kind letter before each value."""
    out: list[str] = []
    row = key.get("row")
    if isinstance(row, str):
        try:
            decoded = [decode_value(encoded) for _, encoded in json.loads(row)]
        except (ValueError, TypeError):
            decoded = [row]
        out += [v for v in decoded if isinstance(v, str)]
    if isinstance(value, str) and value[:1] == "s":
        out.append(value[1:])
    return out


def _record(key: dict[str, CellValue], cells: dict[str, CellValue], version: int, ttl: int | None) -> Upsert:
    """A record row, built without validating again what the mutation or the cell it describes
    already passed (ids, version, TTL; its texts are JSON of checked values): the stream builds
    these per resolved write."""
    out = object.__new__(Upsert)
    object.__setattr__(out, "table", ROUTES_TABLE.name)
    object.__setattr__(out, "key", MappingProxyType(key))
    object.__setattr__(out, "cells", MappingProxyType(cells))
    object.__setattr__(out, "version", version)
    object.__setattr__(out, "ttl", ttl)
    return out


def row_text(key: Mapping[str, CellValue], id_column: str) -> str:
    """A row key without its owner id, as the ``row`` of its records."""
    return json.dumps(sorted([k, encode_value(v)] for k, v in key.items() if k != id_column))


def _key_of(row: str, owner: OwnerColumn, ident: CellValue) -> dict[str, CellValue]:
    return {**{k: decode_value(v) for k, v in json.loads(row)}, owner.id_column: ident}


def cell_records(
    tenant: str,
    origin: str,
    table: str,
    row: str,
    col: str,
    version: int,
    value: str,
    ttl: int | None,
    placed: str | None,
    *,
    origin_gone: bool,
) -> list[Upsert]:
    """The records of one cell taken from ``origin``: its value, its placement (None: dropped)
    and, when the cell was tombstoned under its origin, the origin's placement as gone."""
    base: dict[str, CellValue] = {
        "tenant": tenant, "origin": origin, "tbl": table, "row": row, "col": col, "version": version,
    }  # fmt: skip
    out = [_record({**base, "placed": ""}, {"value": value}, version, ttl)]
    if placed is not None:
        out.append(_record({**base, "placed": placed}, {"live": True}, version, ttl))
    if origin_gone:
        out.append(_record({**base, "placed": origin}, {"live": True, "gone": True}, version, ttl))
    return out


def mutation_records(owner: OwnerColumn, origin: str, m: Mutation, placed: str | None) -> list[Upsert]:
    """The records of a mutation the stream's resolution wrote under ``placed`` instead of
    ``origin`` (None: dropped, its owner was deleted)."""
    tenant = str(m.key[owner.tenant_column])
    if isinstance(m, LogState):
        m = m.as_upsert()
    row = row_text(m.key, owner.id_column)
    out: list[Upsert] = []
    if isinstance(m, Upsert):
        for name, value in m.cells.items():
            out += cell_records(tenant, origin, m.table, row, name, m.version, encode_value(value), m.ttl,
                                placed, origin_gone=False)  # fmt: skip
    else:
        for name in m.columns or ("",):
            out += cell_records(tenant, origin, m.table, row, name, m.version, _TOMBSTONE, None, placed,
                                origin_gone=False)  # fmt: skip
    return out


def _id(schema_of: Callable[[str], TableSchema], owner: OwnerColumn, table: str, ident: str) -> CellValue:
    return id_value(schema_of(table), owner.id_column, ident)


def reroute(
    owners: Mapping[str, OwnerColumn],
    schema_of: Callable[[str], TableSchema],
    tenant: str,
    origin: str,
    intervals: Sequence[Interval],
    rows: Iterable[Row],
    now_s: float,
    report: RouteReport,
    erased: Verdict | None = None,
) -> list[Mutation]:
    """The writes that put the recorded cells of ``(tenant, origin)`` (its ``converge_id_routes``
    partition as read) where ``intervals`` now send them (see the module docstring). With
    ``erased`` (the erasure screen's verdict) an erased subject's recorded cells are not routed:
    their records are deleted at ``MAX_VERSION``, as the erasure deletes them."""
    rows = list(rows)
    withheld = None
    if erased is not None:
        withheld = erased_records(((r.key, r.cells["value"].value if "value" in r.cells else None)
                                   for r in rows), erased)  # fmt: skip
    cells: dict[tuple[str, str, str, int], dict[str, Row]] = {}
    out: list[Mutation] = []
    for r in rows:
        k = r.key
        if withheld is not None and withheld(k):
            out.append(Delete(ROUTES_TABLE.name, dict(k), MAX_VERSION))
            continue
        cell = (str(k["tbl"]), str(k["row"]), str(k["col"]), cell_int(k["version"]))
        cells.setdefault(cell, {})[str(k["placed"])] = r
    for (table, row, col, version), placements in sorted(cells.items()):
        owner, found = owners.get(table), placements.pop("", None)
        if owner is None or found is None or "value" not in found.cells:
            continue
        value = found.cells["value"]
        final = final_of(intervals, origin, version)
        base: dict[str, CellValue] = {
            "tenant": tenant, "origin": origin, "tbl": table, "row": row, "col": col, "version": version,
        }  # fmt: skip
        tombstone = value.value in (_TOMBSTONE, _NONE)
        left = False  # a live placement left: the cell changes place (or is dropped)
        for placed, p in sorted(placements.items()):
            if placed == final or "live" not in p.cells:
                continue
            gone = "gone" in p.cells
            if tombstone:
                if not gone:
                    report.unconverged += 1
                    log.warning("id mutation: %s %s of %s/%s at %d: a tombstone stays under %s (now %s)",
                                table, row, tenant, origin, version, placed, final)  # fmt: skip
            else:
                key = _key_of(row, owner, _id(schema_of, owner, table, placed))
                out.append(Delete(table, key, version, (col,)))
                report.touched.append((table, key))
                left |= not gone
            out.append(Upsert(ROUTES_TABLE.name, {**base, "placed": placed}, {"gone": True}, version))
        if final is None:
            report.rerouted += left
            continue
        at_final = placements.get(final)
        if at_final is not None and "gone" in at_final.cells:
            report.unconverged += 1
            log.warning("id mutation: %s %s of %s/%s at %d goes back to %s, where a tombstone at its "
                        "version already stands: it stays absent", table, row, tenant, origin, version,
                        final)  # fmt: skip
            continue
        ttl = None
        if value.expires_at is not None:
            if value.expires_at <= now_s:
                continue
            ttl = max(1, math.ceil(value.expires_at - now_s))
        key = _key_of(row, owner, _id(schema_of, owner, table, final))
        if value.value == _TOMBSTONE:
            out.append(Delete(table, key, version, (col,) if col else None))
        else:
            out.append(Upsert(table, key, {col: decode_value(value.value)}, version, ttl))  # type: ignore[arg-type]
        report.touched.append((table, key))
        report.rerouted += left or at_final is None
        if at_final is None:
            out.append(Upsert(ROUTES_TABLE.name, {**base, "placed": final}, {"live": True}, version, ttl))
    return out
