"""framework.core.json_codec: orjson's speed, the standard library's values."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core.json_codec import canonical, decode, encode, round_trip

_plain = json.JSONEncoder(separators=(",", ":")).encode
_sorted = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
_strict = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits as well: the fallback writes them
    | st.floats()  # NaN and the infinities as well
    | st.text()  # lone surrogates as well
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN and 1 unequal to 1.0 or True."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(_values)
def test_encode_writes_the_value_the_standard_library_writes(value: Any) -> None:
    assert _same(json.loads(encode(value, _plain)), json.loads(_plain(value)))


@given(_values)
def test_sorted_output_is_the_same_bytes_for_equal_values(value: Any) -> None:
    out = encode(value, _sorted, sort_keys=True)
    again = json.loads(_plain(value))  # an equal value built afresh
    assert encode(again, _sorted, sort_keys=True) == out
    if isinstance(value, dict):
        reversed_keys = dict(reversed(list(value.items())))
        assert encode(reversed_keys, _sorted, sort_keys=True) == out


@given(_values)
def test_decode_reads_what_the_standard_library_reads(value: Any) -> None:
    text = _plain(value)  # NaN, Infinity, escaped surrogates and big integers included
    if any(isinstance(v, int) and not -(2**63) <= v < 2**64 for v in _leaves(value)):
        return  # outside decode's contract (see test_decode_contract_is_64_bit_integers)
    assert _same(decode(text), json.loads(text))
    assert _same(decode(text.encode("ascii")), json.loads(text))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    return [value]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -math.inf])
def test_non_finite_floats_are_the_fallbacks_to_write_or_refuse(value: float) -> None:
    assert encode({"x": value}, _plain) == _plain({"x": value}).encode()
    with pytest.raises(ValueError, match="Out of range float"):
        encode({"x": value}, _strict)


def test_types_beyond_plain_json_go_to_the_fallback() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    day = datetime.date(2026, 11, 27)
    for refused in ({"p": Point(1)}, {"d": day}):
        with pytest.raises(TypeError, match="not JSON serializable"):
            encode(refused, _plain)
    with_default = json.JSONEncoder(default=str, separators=(",", ":")).encode
    assert encode({"d": day}, with_default) == b'{"d":"2026-11-27"}'
    assert encode({1: "int key"}, _plain) == b'{"1":"int key"}'
    assert encode({"big": 2**70}, _plain) == b'{"big":1180591620717411303424}'


def test_decode_contract_is_64_bit_integers() -> None:
    assert decode("[9223372036854775807,-9223372036854775808]") == [2**63 - 1, -(2**63)]
    with pytest.raises(json.JSONDecodeError):
        decode("{not json")


@given(_values)
def test_round_trip_reads_back_what_the_fallback_writes(value: Any) -> None:
    assert _same(round_trip(value, _plain), json.loads(_plain(value)))


@given(_values)
def test_canonical_is_the_sorted_encoding_whatever_the_key_order(value: Any) -> None:
    utf8 = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode
    assert canonical(value) == encode(value, utf8, sort_keys=True)
    if isinstance(value, dict):
        assert canonical(dict(reversed(list(value.items())))) == canonical(value)
