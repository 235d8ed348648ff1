"""``classify``: one expected document against the index's copy, in every category."""

from __future__ import annotations

import datetime

import pytest

from framework.verify import CATEGORIES, classify
from stores.base import SearchHit

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
