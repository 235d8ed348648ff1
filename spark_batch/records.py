"""Row records of Arrow batches decoded for the projection task, with few objects and calls.

``decode`` turns the ``key`` and ``cells`` columns of a batch (``codec``'s
record format) into ``Row`` objects equal to ``codec.record_to_row``'s, and
gives each row's highest write time beside it, taken while its cells are
built (``Row.version`` would walk them again). Each column is decoded with
one ``json`` call; ``Cell`` objects are made without the dataclass
``__init__`` (which only sets the three slots) when the class allows it, and
the blob hook runs only when the column's text holds a blob.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from types import MemberDescriptorType
from typing import Any

from framework.core.cells import Cell
from framework.core.rows import Row

__all__ = ["decode", "cells_decoder", "direct_cells"]

_BLOB = "$b64"
_CELL_SLOTS = ("value", "writetime", "expires_at")


def _slot_setters() -> tuple[Any, Any, Any] | None:
    """The slot setters of ``Cell``, or None when its ``__init__`` may do more than set them."""
    found = [Cell.__dict__.get(name) for name in _CELL_SLOTS]
    if hasattr(Cell, "__post_init__") or not all(isinstance(d, MemberDescriptorType) for d in found):
        return None
    if Cell.__dataclass_fields__.keys() != set(_CELL_SLOTS):
        return None
    return found[0].__set__, found[1].__set__, found[2].__set__  # type: ignore[union-attr]


_SETTERS = _slot_setters()
#: True when cells are made by setting the slots directly (equal to ``Cell(value, writetime)``).
direct_cells = _SETTERS is not None


def cells_decoder(blobs: bool, direct: bool = direct_cells) -> tuple[json.JSONDecoder, list[int]]:
    """A decoder of a ``cells`` column (a JSON array of records' cells) and the list it appends each
    record's highest write time to (0 for a record without cells); ``blobs`` False when the text
    holds no blob, ``direct`` False to make cells with ``Cell(value, writetime)``."""
    tops: list[int] = []
    top = tops.append
    new = object.__new__
    if direct and _SETTERS is not None:
        set_value, set_writetime, set_expiry = _SETTERS

        def cells(pairs: list[tuple[str, Any]]) -> Any:
            if blobs and len(pairs) == 1 and pairs[0][0] == _BLOB:
                return base64.b64decode(pairs[0][1])
            out = {}
            high = int(pairs[0][1][1]) if pairs else 0
            for name, (value, writetime) in pairs:
                wt = int(writetime)
                out[name] = c = new(Cell)
                set_value(c, value)
                set_writetime(c, wt)
                set_expiry(c, None)
                if wt > high:
                    high = wt
            if len(out) != len(pairs):  # a column given twice: the last one counts
                high = max((c.writetime for c in out.values()), default=0)
            top(high)
            return out

    else:

        def cells(pairs: list[tuple[str, Any]]) -> Any:
            if blobs and len(pairs) == 1 and pairs[0][0] == _BLOB:
                return base64.b64decode(pairs[0][1])
            made = {name: Cell(value, int(wt)) for name, (value, wt) in pairs}
            top(max((c.writetime for c in made.values()), default=0))
            return made

    return json.JSONDecoder(object_pairs_hook=cells), tops


def _key_object(pairs: list[tuple[str, Any]]) -> Any:
    if len(pairs) == 1 and pairs[0][0] == _BLOB:
        return base64.b64decode(pairs[0][1])
    return dict(pairs)


_KEYS_WITH_BLOBS = json.JSONDecoder(object_pairs_hook=_key_object)
_PLAIN = json.JSONDecoder()


def _array(texts: Sequence[str]) -> str:
    return "[" + ",".join(texts) + "]"


def decode(keys: Sequence[str], cells: Sequence[str]) -> tuple[list[Row], list[int]]:
    """The rows of records' ``key`` and ``cells`` texts, and each row's highest write time (0 for a
    row without cells). ValueError when a text is not one JSON object."""
    if not keys:
        return [], []
    key_text, cell_text = _array(keys), _array(cells)
    decoded_keys = (_KEYS_WITH_BLOBS if _BLOB in key_text else _PLAIN).decode(key_text)
    decoder, tops = cells_decoder(_BLOB in cell_text)
    decoded_cells = decoder.decode(cell_text)
    n = len(keys)
    if len(decoded_keys) != n or len(decoded_cells) != n or len(tops) != n:
        raise ValueError("a row record's key or cells is not one JSON object")
    return _rows(decoded_keys, decoded_cells), tops


def _rows(keys: list[dict[str, Any]], cells: list[dict[str, Cell]]) -> list[Row]:
    return list(map(Row, keys, cells))
