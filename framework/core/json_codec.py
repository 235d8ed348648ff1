"""Compact JSON through orjson, with the standard library's answer wherever the two could differ.

orjson encodes and decodes several times faster than ``json``, but it writes NaN and the
infinities as ``null``, refuses integers beyond 64 bits, keys that are not strings and lone
surrogates, and reads integers beyond 64 bits as floats. So:

- ``encode`` falls back to the caller's standard-library encoder whenever orjson raises or its
  output holds a ``null`` (which may have been a non-finite float): the value written is always
  the one that encoder means, and its errors stay the caller's errors. Dataclasses, dates and
  subclasses of built-in types also go to the fallback, so only plain JSON values take the
  fast path.
- ``round_trip`` (a value as read back from its JSON) takes orjson's way only where ``encode``
  does.
- ``canonical`` is ``encode`` with sorted keys: the text a document's digest is taken of, and
  the rule every check compares documents by (``same_json``, ``content_digest``): the change
  verifier, its sweeps and ``converge spark check`` alike, so ``2`` and ``2.0``, ``1`` and
  ``true`` differ in all of them, as they do in the index (Python's ``==`` calls them equal).
- ``decode`` falls back to ``json.loads`` whenever orjson refuses the text (``NaN`` and
  ``Infinity`` literals, escaped lone surrogates) and is only for text whose integers fit in
  64 bits, as every value the stores accept does (``framework.core.mutations.check_value``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["canonical", "content_digest", "decode", "encode", "round_trip", "same_json"]

_PLAIN = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
_SORTED = _PLAIN | orjson.OPT_SORT_KEYS


def _exact(value: Any, option: int) -> bytes | None:
    """orjson's text of ``value`` when it is the value itself (no ``null`` that may have been a
    NaN or an infinity, nothing orjson refuses), else None."""
    try:
        out = orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:
        return None
    return None if b"null" in out else out


def encode(value: Any, fallback: Callable[[Any], str], *, sort_keys: bool = False) -> bytes:
    """``value`` as compact UTF-8 JSON, equal in value to ``fallback(value).encode()``.

    ``fallback`` is a standard-library encoder with separators ``(",", ":")`` and the same
    ``sort_keys``; it also decides every value orjson would not write exactly as it does.
    """
    out = _exact(value, _SORTED if sort_keys else _PLAIN)
    return fallback(value).encode("utf-8") if out is None else out


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical(value: Any) -> bytes:
    """``value`` as canonical UTF-8 JSON (keys sorted, compact), the text to digest a document by;
    TypeError or ValueError when it is not JSON (a lone surrogate among them)."""
    return encode(value, _CANONICAL, sort_keys=True)


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON: their ``canonical`` texts are equal (key order
    aside, ``2`` is not ``2.0`` and ``1`` is not ``true``). How the verifier compares a document
    with the index's copy; ``converge spark check`` compares their ``content_digest``."""
    return a is b or canonical(a) == canonical(b)


def content_digest(value: Any) -> str:
    """The hex SHA-1 of ``canonical(value)``: the content digest ``converge spark check`` joins
    a document and the index's copy on (equal exactly when ``same_json`` says so)."""
    return hashlib.sha1(canonical(value), usedforsecurity=False).hexdigest()


def round_trip(value: Any, fallback: Callable[[Any], str]) -> Any:
    """``json.loads(fallback(value))``: ``value`` as read back from the JSON ``fallback`` writes.

    What orjson writes exactly it also reads back exactly (the integers it writes fit in 64
    bits), so the standard library runs only for what orjson would not write.
    """
    out = _exact(value, _PLAIN)
    return json.loads(fallback(value)) if out is None else orjson.loads(out)


def decode(text: str | bytes) -> Any:
    """The value of JSON ``text`` whose integers fit in 64 bits; ``json.loads``'s for any other."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
