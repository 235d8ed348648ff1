"""Lookup joins through the test driver: waiting, re-mapping, moved rows, the version rule."""

from __future__ import annotations

from framework.state import JoinConfig
from framework.testing import Driver
from tests.state.join_app import child, join_app, parent_set
from tests.state.join_model import At


def hello(label: str) -> dict[str, str]:
    """The cells of the child ``m1`` (body ``hello``, conversation ``c1``) under ``label``."""
    return {"body": "hello", "conv": "c1", "label": label}


def msgs(d: Driver) -> dict[tuple[str, str], tuple[dict, int]]:
    return {(r.key["parent"], r.key["msg_id"]): (r.values(), r.version) for r in d.rows("msg")}


def test_an_event_waits_for_its_entry_then_is_mapped() -> None:
    with Driver(join_app()) as d:
        assert d.send(child("m1", "c1", "hello", 100)) == []
        assert msgs(d) == {}
        assert d.pending() == {"children": [("c-m1", "parent", "c1")]}
        d.send(parent_set("c1", "A", "alpha", 50))
        assert msgs(d) == {("A", "m1"): (hello("alpha"), 100)}  # mapped once: at its version
        assert d.pending() == {"children": []}


def test_a_changed_entry_moves_the_row_and_writes_at_the_higher_version() -> None:
    with Driver(join_app()) as d:
        d.send([parent_set("c1", "A", "alpha", 50), child("m1", "c1", "hello", 100)])
        d.send(parent_set("c1", "B", "beta", 200))
        expected = {("B", "m1"): (hello("beta"), 101)}  # one above the mapping it replaces
        assert msgs(d) == expected
        # the old entry arriving late changes nothing
        d.send(parent_set("c1", "A", "alpha", 50))
        d.send(child("m1", "c1", "hello", 100))  # a replay
        assert msgs(d) == expected


def test_an_entry_change_older_than_the_event_arriving_after_it_still_outranks_the_first_mapping() -> None:
    with Driver(join_app()) as d:
        d.send([parent_set("c1", "A", "alpha", 10), child("m1", "c1", "hello", 100)])
        d.send(parent_set("c1", "A", "beta", 20))  # older than the event, the row does not move
        assert msgs(d) == {("A", "m1"): (hello("beta"), 101)}


def test_a_row_moved_away_and_back_below_the_event_version_is_live() -> None:
    """A -> B -> A with every entry older than the event: each re-mapping writes above the last,
    so the row moved back is live (the move's tombstone below it)."""
    with Driver(join_app()) as d:
        d.send([parent_set("c1", "A", "alpha", 10), child("m1", "c1", "hello", 100)])
        d.send([parent_set("c1", "B", "beta", 20), parent_set("c1", "A", "alpha", 30)])
        assert msgs(d) == {("A", "m1"): At(hello("alpha"), 101, 1)}  # one re-mapping per change seen


def test_a_bad_event_is_parked_and_a_full_pending_store_parks_with_a_clear_error() -> None:
    with Driver(join_app(JoinConfig(max_pending=1))) as d:
        bad = child("m0", "c9", "x", 5)
        bad = type(bad)(bad.event_id, bad.ordering_key, 5, 5, bad.type, {**bad.payload, "bad": True})
        assert [p.stage for p in d.send(bad)] == ["map"]
        d.send(child("m1", "c1", "a", 100))
        parked = d.send(child("m2", "c2", "b", 100))
        assert [p.stage for p in parked] == ["lookup"]
        assert "max_pending" in str(parked[0].error)
        d.send(child("m1", "c1", "a", 100))  # a duplicate of a pending event is no new one
        assert d.pending() == {"children": [("c-m1", "parent", "c1")]}
