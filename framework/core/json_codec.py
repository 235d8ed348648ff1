"""Compact JSON through orjson, with the standard library's answer wherever the two could differ.

orjson encodes and decodes several times faster than ``json``, but it writes NaN and the
infinities as ``null``, refuses integers beyond 64 bits, keys that are not strings and lone
surrogates, and reads integers beyond 64 bits as floats. So:

- ``encode`` falls back to the caller's standard-library encoder whenever orjson raises or its
  output holds a ``null`` (which may have been a non-finite float): the value written is always
  the one that encoder means, and its errors stay the caller's errors. Dataclasses, dates and
  subclasses of built-in types also go to the fallback, so only plain JSON values take the
  fast path.
- ``decode`` falls back to ``json.loads`` whenever orjson refuses the text (``NaN`` and
  ``Infinity`` literals, escaped lone surrogates) and is only for text whose integers fit in
  64 bits, as every value the stores accept does (``framework.core.mutations.check_value``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["decode", "encode", "round_trip"]

_PLAIN = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
_SORTED = _PLAIN | orjson.OPT_SORT_KEYS


def encode(value: Any, fallback: Callable[[Any], str], *, sort_keys: bool = False) -> bytes:
    """``value`` as compact UTF-8 JSON, equal in value to ``fallback(value).encode()``.

    ``fallback`` is a standard-library encoder with separators ``(",", ":")`` and the same
    ``sort_keys``; it also decides every value orjson would not write exactly as it does.
    """
    try:
        out = orjson.dumps(value, option=_SORTED if sort_keys else _PLAIN)
    except orjson.JSONEncodeError:
        return fallback(value).encode("utf-8")
    if b"null" in out:  # maybe a NaN or an infinity, which orjson writes as null
        return fallback(value).encode("utf-8")
    return out


def round_trip(value: Any, fallback: Callable[[Any], str]) -> Any:
    """``json.loads(fallback(value))``: ``value`` as read back from the JSON ``fallback`` writes.

    When orjson writes ``value`` exactly, it also reads it back exactly (the integers it writes
    fit in 64 bits), so the standard library runs only for what orjson would not write.
    """
    try:
        out = orjson.dumps(value, option=_PLAIN)
    except orjson.JSONEncodeError:
        return json.loads(fallback(value))
    if b"null" in out:
        return json.loads(fallback(value))
    return orjson.loads(out)


def decode(text: str | bytes) -> Any:
    """The value of JSON ``text`` whose integers fit in 64 bits; ``json.loads``'s for any other."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
