"""A lookup fed by a topic no agent consumes (issue 22, case 3): declared with its event types in
``App(lookup_topics=...)``, created with the app's topics, and fed by the test kit from events of
those types, so the joined rows are the mapping applied with the final entries (a model written
here), for any delivery; undeclared, ``App(...)`` refuses it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import App, Event
from framework.testing import Driver, assert_converges, deliveries
from tests.testing.directory_app import OWNERS_TOPIC, NoteAgent, app, note, owner_set

#: (owner, note id) -> {column: value}: the live rows of ``dir_note``.
Rows = dict[tuple[str, str], dict[str, Any]]


def model(history: Sequence[Event]) -> Rows:
    """The notes mapped with the final entries: per conversation the entry of the highest version
    (then the larger canonical JSON value). Write times are the join version rule's (README), not
    this feature's: compared as values only."""
    final: dict[str, tuple[int, str, dict[str, str]]] = {}
    for e in history:
        if e.type == "owner.set":
            value = {"owner": e.payload["owner"], "label": e.payload["label"]}
            mine = (e.version, json.dumps(value, sort_keys=True, separators=(",", ":")), value)
            if e.payload["conv"] not in final or mine[:2] > final[e.payload["conv"]][:2]:
                final[e.payload["conv"]] = mine
    rows: Rows = {}
    for e in history:
        if e.type == "note.posted" and e.payload["conv"] in final:
            entry = final[e.payload["conv"]][2]
            rows[(entry["owner"], e.payload["note"])] = {"body": e.payload["body"], "label": entry["label"]}
    return rows


def stored(d: Driver) -> Rows:
    return {(r.key["owner"], r.key["note_id"]): r.values() for r in d.rows("dir_note")}


def test_an_undeclared_lookup_topic_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError) as refused:
        App("directory", agents=[NoteAgent()])
    assert str(refused.value) == (
        "App directory: lookup 'owner' reads topic 'dir.owners', which no agent consumes: "
        "declare the event types it carries, App(lookup_topics={'dir.owners': (...)})"
    )


@pytest.mark.parametrize(
    ("lookup_topics", "message"),
    [
        ({"dir.notes": ("x",), OWNERS_TOPIC: ("owner.set",)}, "names 'dir.notes', which is an agent's topic"),
        (
            {"elsewhere": ("x",), OWNERS_TOPIC: ("owner.set",)},
            "names 'elsewhere', which is no lookup's topic",
        ),
        ({OWNERS_TOPIC: ()}, "needs its event types"),
        ({OWNERS_TOPIC: ("note.posted",)}, "event type 'note.posted' in notes and lookup topic 'dir.owners'"),
    ],
)
def test_lookup_topics_are_checked(lookup_topics: dict[str, tuple[str, ...]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        App("directory", agents=[NoteAgent()], lookup_topics=lookup_topics)


def test_the_lookup_topic_is_one_of_the_app_topics() -> None:
    assert app.topics() == {"dir.notes": "notes", OWNERS_TOPIC: "lookup.owner"}
    assert app.topic_of(owner_set("c1", "A", "a", 1)) == OWNERS_TOPIC
    assert app.topic_of(note("n1", "c1", "b", 1)) == "dir.notes"


def test_the_driver_feeds_the_lookup_from_its_event_types_without_a_topic() -> None:
    """Before: the entries were parked at route and the note waited forever."""
    history = [note("n1", "c1", "hello", 5), owner_set("c1", "A", "alpha", 10)]
    with Driver(app) as d:
        assert d.send(history) == []
        assert d.pending() == {"notes": []}
        assert stored(d) == {("A", "n1"): {"body": "hello", "label": "alpha"}}
        d.send(owner_set("c1", "B", "beta", 20), topic=OWNERS_TOPIC)  # the topic named: the same path
        assert stored(d) == {("B", "n1"): {"body": "hello", "label": "beta"}}


def test_assert_converges_on_a_lookup_topic_history_joins_rows() -> None:
    history = [owner_set("c1", "A", "alpha", 10), note("n1", "c1", "x", 5), owner_set("c1", "B", "b", 30)]
    delivered = assert_converges(app, history, max_examples=20)
    assert delivered.parked == frozenset() and delivered.pending == frozenset()
    assert set(delivered.tables["dir_note"]) == {("B", "n1")}


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """Entries of up to three conversations (unique versions above every note's, so no re-mapping
    ties with an earlier mapping) and notes of conversations that have an entry, in any order."""
    n_entries = draw(st.integers(1, 6))
    versions = draw(st.lists(st.integers(1000, 1100), min_size=n_entries, max_size=n_entries, unique=True))
    entries = [
        owner_set(
            draw(st.sampled_from(["c0", "c1", "c2"])),
            draw(st.sampled_from("ABC")),
            draw(st.sampled_from("xy")),
            v,
        )
        for v in versions
    ]
    convs = sorted({e.payload["conv"] for e in entries})
    notes = [
        note(
            f"n{i}",
            draw(st.sampled_from(convs)),
            draw(st.sampled_from(["hi", "yo"])),
            draw(st.integers(1, 999)),
        )
        for i in range(draw(st.integers(1, 5)))
    ]
    return draw(st.permutations(entries + notes))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_delivery_of_a_lookup_topic_history_stores_the_model(data: st.DataObject) -> None:
    history = data.draw(histories(), label="history")
    order = data.draw(deliveries(history, max_duplicates=3), label="delivery")
    expected = model(history)
    assert expected  # every note's conversation has an entry
    with Driver(app) as d:
        assert d.send(order) == []
        assert d.pending() == {"notes": []}
        assert stored(d) == expected
    assert_converges(app, history, order)  # the kit's own check, not vacuous here
