"""``classify``: one expected document against the index's copy, in every category."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from framework.verify import CATEGORIES, classify
from framework.verify.compare import as_stored
from stores.base import SearchHit
from stores.elasticsearch.checks import DocumentError

DOC = {"title": "t", "n": 3, "at": datetime.date(2026, 1, 2)}


@pytest.mark.parametrize(
    ("expected", "found", "versions", "category"),
    [
        (("a", DOC, 5), SearchHit("a", 5, {"title": "t", "n": 3, "at": "2026-01-02"}), True, None),
        (("a", DOC, 5), None, True, "missing"),
        (("a", None, 5), SearchHit("a", 4, {"title": "t"}), True, "orphaned"),
        (("a", None, 5), None, True, None),
        (("a", DOC, 5), SearchHit("a", 4, {"title": "t", "n": 3, "at": "2026-01-02"}), True, "stale"),
        (("a", DOC, 5), SearchHit("a", 9, {"title": "t", "n": 3, "at": "2026-01-02"}), True, "ahead"),
        (("a", DOC, 5), SearchHit("a", 5, {"title": "t", "n": 4, "at": "2026-01-02"}), True, "content"),
        (("a", DOC, 5), SearchHit("a", 5, {"title": "t", "n": 3}), True, "content"),
        (("a", DOC, 5), SearchHit("a", 9, {"title": "t", "n": 3, "at": "2026-01-02"}), False, None),
        (("a", DOC, 5), SearchHit("a", 9, {"title": "x", "n": 3, "at": "2026-01-02"}), False, "content"),
    ],
)
def test_each_category(expected, found, versions, category) -> None:  # type: ignore[no-untyped-def]
    assert classify(expected, found, versions=versions) == category
    assert category is None or category in CATEGORIES


@pytest.mark.parametrize(
    ("doc", "stored"),
    [
        ({"n": 1, "x": 1.0, "b": True, "t": ("a", "b")}, {"n": 1, "x": 1.0, "b": True, "t": ["a", "b"]}),
        ({"big": 2**70, "none": None}, {"big": 2**70, "none": None}),  # beyond orjson: the stdlib reads it
        ({"at": datetime.date(2026, 1, 2)}, {"at": "2026-01-02"}),  # as the Elasticsearch client writes it
    ],
)
def test_as_stored_is_the_document_as_the_index_returns_it(doc: Any, stored: dict[str, Any]) -> None:
    out = as_stored(doc)
    assert out == stored and [type(v) for v in out.values()] == [type(v) for v in stored.values()]


@pytest.mark.parametrize("doc", [{"_id": "x"}, {"x": float("nan")}, ["not", "a", "mapping"], {1: "key"}])
def test_as_stored_refuses_what_the_index_writer_refuses(doc: Any) -> None:
    with pytest.raises(DocumentError):
        as_stored(doc)
