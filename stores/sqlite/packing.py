"""The cells of one stored row, packed into one JSON text and back.

A packed row is ``{"column": [value, writetime]}``, or ``[value, writetime, expires_at]`` for
an expiring cell (an *item*); a cell tombstone's value is ``null``. JSON has no bytes, so blob
values are base64 text: the column's type in the schema tells them apart. Every other value
survives JSON as it is: int64 integers, doubles (``-0.0`` and infinities included; NaN is never
stored), booleans and text (never a lone surrogate, so a packed row is always valid UTF-8).
Rows are packed and read through ``framework.core.json_codec`` (orjson where it is exact).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from framework.core.cells import Cell
from framework.core.json_codec import decode, encode
from framework.core.schema import TableSchema

__all__ = [
    "Item",
    "blob_columns",
    "columns_of",
    "live_cells",
    "pack",
    "items",
    "dump",
    "item_of",
    "cell_of",
]

#: One packed cell: ``[value, writetime]`` or ``[value, writetime, expires_at]``.
Item = list[Any]

_exact = json.JSONEncoder(separators=(",", ":")).encode


def dump(row: Mapping[str, Item]) -> str:
    """The packed row as JSON text (compact)."""
    return encode(row, _exact).decode("utf-8")


#: The packed row from its JSON text.
items: Any = decode

#: The regular columns of each type of each schema seen, by the schema's identity (hashing a
#: schema costs more than the lookup saves).
_COLUMNS: dict[tuple[int, str], tuple[TableSchema, frozenset[str]]] = {}


def columns_of(schema: TableSchema, kind: str) -> frozenset[str]:
    """The names of ``schema``'s regular columns of type ``kind``."""
    known = _COLUMNS.get((id(schema), kind))
    if known is None or known[0] is not schema:
        if len(_COLUMNS) > 4096:
            _COLUMNS.clear()
        names = frozenset(c.name for c in schema.columns if c.type == kind)
        known = _COLUMNS[(id(schema), kind)] = (schema, names)
    return known[1]


def blob_columns(schema: TableSchema) -> frozenset[str]:
    """The names of ``schema``'s blob columns (their items hold base64 text)."""
    return columns_of(schema, "blob")


def item_of(blobs: frozenset[str], name: str, cell: Cell) -> Item:
    """The item of ``cell`` in column ``name`` (``blobs``: the schema's blob columns)."""
    value: Any = cell.value
    if value is not None and name in blobs:
        value = base64.b64encode(value).decode("ascii")
    if cell.expires_at is None:
        return [value, cell.writetime]
    return [value, cell.writetime, cell.expires_at]


def cell_of(blobs: frozenset[str], name: str, item: Item) -> Cell:
    """The cell an item of column ``name`` holds."""
    value = item[0]
    if value is not None and name in blobs:
        value = base64.b64decode(value)
    return Cell(value, item[1], item[2] if len(item) > 2 else None)


def pack(schema: TableSchema, cells: Mapping[str, Cell]) -> str:
    """The JSON text holding ``cells`` (column name to cell) of a row of ``schema``."""
    blobs = blob_columns(schema)
    return dump({name: item_of(blobs, name, cell) for name, cell in cells.items()})


def live_cells(schema: TableSchema, text: str, now: float, cover: int | None) -> dict[str, Cell]:
    """The cells of ``text`` that hold a value, have not expired at ``now`` and are not shadowed by
    a tombstone at ``cover`` (``framework.core.cells.is_live`` and ``shadowed``, on the items)."""
    blobs = blob_columns(schema)
    out: dict[str, Cell] = {}
    for name, i in items(text).items():
        value = i[0]
        if value is None or (cover is not None and i[1] <= cover):
            continue
        expires = i[2] if len(i) > 2 else None
        if expires is not None and expires <= now:
            continue
        if name in blobs:
            value = base64.b64decode(value)
        out[name] = Cell(value, i[1], expires)
    return out
