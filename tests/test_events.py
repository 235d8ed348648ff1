"""The event parser: strict, typed errors naming the field, lossless round trip."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.events import MAX_EVENT_BYTES, Event, EventError, parse_event
from framework.core.mutations import MAX_VERSION

GOOD = {"event_id": "e1", "ordering_key": "org:1", "version": 10, "occurred_at": 5, "type": "email.sent"}


def test_parses_bytes_text_and_mappings_alike() -> None:
    expected = Event("e1", "org:1", 10, 5, "email.sent", {"a": [1, 2]})
    raw = {**GOOD, "payload": {"a": [1, 2]}}
    assert (
        parse_event(raw) == parse_event(json.dumps(raw)) == parse_event(json.dumps(raw).encode()) == expected
    )
    assert parse_event(GOOD).payload == {}


@pytest.mark.parametrize("field", sorted(GOOD))
def test_a_missing_field_is_named(field: str) -> None:
    with pytest.raises(EventError) as err:
        parse_event({k: v for k, v in GOOD.items() if k != field})
    assert err.value.field == field and "missing" in str(err.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", "10"),
        ("version", 1.0),
        ("version", True),
        ("version", -1),
        ("version", MAX_VERSION + 1),
        ("occurred_at", None),
        ("occurred_at", -3),
        ("event_id", 5),
        ("event_id", ""),
        ("event_id", "x" * 513),
        ("event_id", "\ud800"),
        ("ordering_key", ["org"]),
        ("type", "t" * 129),
        ("payload", [1]),
        ("payload", "text"),
    ],
)
def test_an_ill_typed_field_is_named(field: str, value: object) -> None:
    with pytest.raises(EventError) as err:
        parse_event({**GOOD, field: value})
    assert err.value.field == field


def test_a_lone_surrogate_escaped_in_json_is_refused() -> None:
    raw = json.dumps(GOOD).replace('"e1"', '"\\ud800"')
    with pytest.raises(EventError) as err:
        parse_event(raw)
    assert err.value.field == "event_id"


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe",
        b"{not json",
        "[1, 2]",
        b"null",
        42,
        b" " * (MAX_EVENT_BYTES + 1),
        "x" * (MAX_EVENT_BYTES + 1),
    ],
)
def test_undecodable_events_are_refused_as_a_whole(raw: object) -> None:
    with pytest.raises(EventError) as err:
        parse_event(raw)  # type: ignore[arg-type]
    assert err.value.field == "event"


_text = st.text(min_size=1, max_size=40).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
_micros = st.integers(0, MAX_VERSION)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(
    event=st.builds(
        Event, _text, _text, _micros, _micros, _text, st.dictionaries(st.text(max_size=8), _json, max_size=4)
    )
)
def test_to_json_round_trips(event: Event) -> None:
    assert parse_event(event.to_json()) == event
    assert event.to_json() == parse_event(event.to_json()).to_json()


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # beyond 64 bits too: orjson would read those as floats
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


def _outcome(raw: bytes | str | Mapping[str, Any]) -> object:
    try:
        return parse_event(raw)
    except EventError as exc:
        return (exc.field, str(exc))


@settings(max_examples=300, deadline=None)
@given(
    payload=_JSON,
    version=st.integers(-5, 2**64) | st.sampled_from([0, MAX_VERSION, MAX_VERSION + 1]),
    cut=st.integers(0, 400) | st.none(),
)
def test_bytes_parse_as_the_standard_library_reads_text(
    payload: object, version: int, cut: int | None
) -> None:
    """Bytes take orjson's fast path; whatever they hold (integers beyond 64 bits, NaN-free floats,
    any text, truncated JSON) the event or the error is the one the standard library's reading
    of the same text gives."""
    body = json.dumps({**GOOD, "version": version, "payload": payload}).encode()
    if cut is not None:
        body = body[:cut]
    assert _outcome(body) == _outcome(body.decode("utf-8", "surrogatepass"))


#: Boundary values of every envelope field (lengths 128/512 are the limits of type and the ids).
_BOUNDARY = [None, True, False, -1, 0, 1, 1.0, MAX_VERSION, MAX_VERSION + 1, "", "a", "1", "é", "\ud800",
             "x" * 128, "x" * 129, "x" * 512, "x" * 513, {}, {"a": 1}, []]  # fmt: skip
_FIELD = st.sampled_from(_BOUNDARY) | st.text(max_size=3)


@settings(max_examples=600, deadline=None)
@given(
    fields=st.builds(
        lambda changed, dropped: {**{k: v for k, v in GOOD.items() if k not in dropped}, **changed},
        st.dictionaries(st.sampled_from([*GOOD, "payload"]), _FIELD, max_size=2),
        st.sets(st.sampled_from([*GOOD, "payload"]), max_size=1),
    )
)
def test_a_dict_envelope_is_read_as_any_mapping_is(fields: dict[str, object]) -> None:
    """A dict takes the parser's one-step check; the same fields in another mapping take the
    field-by-field rules: the same event or the same error either way (the good envelope with
    up to two fields changed, one dropped)."""
    assert _outcome(fields) == _outcome(MappingProxyType(fields))
