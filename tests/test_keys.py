"""Natural keys: deterministic across processes, unambiguous, validated."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.keys import natural_key


def test_same_inputs_give_the_same_uuid5_in_another_process() -> None:
    here = natural_key("email", "gmail", "msg-42")
    code = "from framework.core.keys import natural_key; print(natural_key('email', 'gmail', 'msg-42'))"
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert here == there and uuid.UUID(here).version == 5


def test_keys_are_stable_across_releases() -> None:
    """A stored row's id must never change: this value was computed once and pinned."""
    assert natural_key("email", "gmail", "42") == "f989b37e-6565-5d51-acd9-39518564b3b6"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("ns", "a:b"), ("ns", "a", "b")),
        (("ns", "a|b"), ("ns", "a", "b")),
        (("ns", "1:a|1:b"), ("ns", "a", "b")),
        (("ns", "ab", "c"), ("ns", "a", "bc")),
        (("ns1", "x"), ("ns", "1x")),
        (("a", "b"), ("b", "a")),
    ],
)
def test_different_field_splits_give_different_keys(a: tuple, b: tuple) -> None:
    assert natural_key(*a) != natural_key(*b)


_fields = st.lists(st.text(max_size=6, alphabet="ab:|1"), min_size=1, max_size=4).map(tuple)


@settings(max_examples=500, deadline=None)
@given(ns=st.sampled_from(["x", "x:1"]), a=_fields, b=_fields)
def test_distinct_field_tuples_never_collide(ns: str, a: tuple, b: tuple) -> None:
    assert (natural_key(ns, *a) == natural_key(ns, *b)) == (a == b)


@pytest.mark.parametrize(
    ("ns", "fields"), [("", ("a",)), (None, ("a",)), (3, ("a",)), ("ns", ()), ("ns", ("a", None))]
)
def test_bad_inputs_raise_value_error(ns: object, fields: tuple) -> None:
    with pytest.raises(ValueError):
        natural_key(ns, *fields)  # type: ignore[arg-type]


_any_field = st.one_of(
    st.text(max_size=12), st.integers(), st.floats(allow_nan=False), st.booleans(), st.binary(max_size=6)
)


@settings(max_examples=500, deadline=None)
@given(ns=st.text(min_size=1, max_size=8), fields=st.lists(_any_field, min_size=1, max_size=4))
def test_the_key_is_uuid5_of_the_length_prefixed_fields(ns: str, fields: list[object]) -> None:
    """The key is ``uuid.uuid5`` of the joined fields under the namespace's uuid5, cached or not."""
    name = "|".join(f"{len(str(f))}:{f}" for f in fields)
    want = str(uuid.uuid5(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "converge:natural-key"), ns), name))
    assert natural_key(ns, *fields) == want
    assert natural_key(ns, *fields) == want  # the second call is served by the cache


def test_equal_fields_of_different_texts_are_not_confused_by_the_cache() -> None:
    """1, 1.0 and True, or 0.0 and -0.0, are equal in Python but their texts differ, and so do
    their keys."""
    keys = [natural_key("n", 1), natural_key("n", 1.0), natural_key("n", True), natural_key("n", "1")]
    assert keys[0] == keys[3] and len(set(keys)) == 3
    assert natural_key("n", 0.0) != natural_key("n", -0.0)


def test_unhashable_fields_are_keyed_by_their_text() -> None:
    assert natural_key("n", ["a", 1]) == natural_key("n", "['a', 1]")
