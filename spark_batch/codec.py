"""Rows and documents as plain records that Spark can carry (and Parquet can store).

A store row becomes ``(table, pk, key, cells)``: ``pk`` is the canonical JSON
of its partition key (rows of different tables with the same partition key
share it, so they can be grouped), ``key`` the JSON of its whole primary key
and ``cells`` the JSON of ``{column: [value, writetime]}``. Blob values are
``{"$b64": ...}``. A document's content is compared by the digest of its
canonical JSON (sorted keys, no spaces: ``framework.core.json_codec.canonical``), which both
sides compute the same way, and the change verifier compares by too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from framework.core.cells import Cell
from framework.core.json_codec import canonical, content_digest
from framework.core.mutations import CellValue
from framework.core.rows import Row
from framework.core.schema import TableSchema

__all__ = [
    "ROW_FIELDS",
    "canonical_json",
    "digest",
    "document_text",
    "row_to_record",
    "record_to_row",
    "rows_from_records",
    "partition_json",
    "key_from_json",
]

#: Field names of a row record, in order.
ROW_FIELDS = ("table", "pk", "key", "cells")


def _plain(value: CellValue) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    return value


def _cell_value(raw: Any) -> CellValue:
    if isinstance(raw, dict):
        return base64.b64decode(raw["$b64"])
    return raw


#: ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, built once.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of ``obj`` (sorted keys, compact separators)."""
    return _CANONICAL.encode(obj)


def digest(doc: Mapping[str, Any]) -> str:
    """A content digest of a document: ``json_codec.content_digest`` (hex SHA-1 of its canonical
    JSON), the rule the change verifier compares documents by too (``json_codec.same_json``)."""
    return content_digest(doc)


def document_text(source: Mapping[str, Any]) -> str:
    """An index document's source as the text whose SHA-1 is its ``digest``."""
    return canonical(source).decode("utf-8")


def partition_json(schema: TableSchema, key: Mapping[str, CellValue]) -> str:
    """The canonical JSON of the partition-key part of ``key``."""
    return canonical_json({c.name: _plain(key[c.name]) for c in schema.partition_key})


def key_from_json(text: str) -> dict[str, CellValue]:
    """The key a ``partition_json`` text (or a record's ``key``) describes."""
    return {name: _cell_value(v) for name, v in json.loads(text).items()}


def row_to_record(schema: TableSchema, row: Row) -> tuple[str, str, str, str]:
    """``(table, pk, key, cells)`` of a row of ``schema``."""
    key = canonical_json({name: _plain(v) for name, v in row.key.items()})
    cells = canonical_json({name: [_plain(c.value), c.writetime] for name, c in row.cells.items()})
    return schema.name, partition_json(schema, row.key), key, cells


def record_to_row(key: str, cells: str) -> Row:
    """The row a record's ``key`` and ``cells`` describe (live cells, no expiry)."""
    k = key_from_json(key)
    c = {name: Cell(_cell_value(v), int(wt)) for name, (v, wt) in json.loads(cells).items()}
    return Row(k, c)


def _key_object(pairs: list[tuple[str, Any]]) -> Any:
    if len(pairs) == 1 and pairs[0][0] == "$b64":
        return base64.b64decode(pairs[0][1])
    return dict(pairs)


def _cells_object(pairs: list[tuple[str, Any]]) -> Any:
    if len(pairs) == 1 and pairs[0][0] == "$b64":
        return base64.b64decode(pairs[0][1])
    return {name: Cell(v, int(wt)) for name, (v, wt) in pairs}


# Column names are identifiers, so an object with the one member ``$b64`` is always a blob.
_KEYS = json.JSONDecoder(object_pairs_hook=_key_object)
_CELLS = json.JSONDecoder(object_pairs_hook=_cells_object)


def rows_from_records(keys: Sequence[str], cells: Sequence[str]) -> list[Row]:
    """``record_to_row`` of many records: each column is decoded in one call, straight into cells."""
    if not keys:
        return []
    decoded_keys = _KEYS.decode("[" + ",".join(keys) + "]")
    decoded_cells = _CELLS.decode("[" + ",".join(cells) + "]")
    if len(decoded_keys) != len(keys) or len(decoded_cells) != len(keys):
        raise ValueError("a row record's key or cells is not one JSON object")
    return list(map(Row, decoded_keys, decoded_cells))
