"""Declarations, subjects, the residue test, keyed hashes and the deny-list screen in ``map_event``."""

from __future__ import annotations

import pytest

from framework.core.events import Event
from framework.core.mutations import LogState, Upsert
from framework.core.schema import SchemaError
from framework.erasure import (
    ErasureKeyError,
    PersonalData,
    SubjectScreen,
    erasure_key,
    mentions,
    parse_subject,
)
from framework.erasure.declare import check_declarations
from framework.erasure.keyed import ENV_KEY, subject_hash
from framework.runtime.errors import MessageError
from framework.runtime.mapping import map_event
from tests.erasure.notes_app import NOTE, PERSON, NotesAgent, app

KEY = b"k" * 32


def _event(type_: str, version: int = 10, **payload: object) -> Event:
    return Event(f"e{version}", "k", version, version, type_, payload)


def test_parse_subject_never_echoes_the_value() -> None:
    s = parse_subject("email:Ann@Example.org")
    assert (s.kind, s.value) == ("email", "Ann@Example.org")
    assert "Ann" not in repr(s)
    for bad in ("Ann@Example.org", "EMAIL:x", "email:", "email: x"):
        with pytest.raises(ValueError) as info:
            parse_subject(bad)
        assert "Ann" not in str(info.value)


def test_mentions_is_a_whole_token_case_insensitive() -> None:
    assert mentions("to: Ann@Example.org.", "ann@example.org")
    assert mentions('{"cc":"b@x.io;ann@example.org"}', "ann@example.org")
    assert not mentions("joann@example.org", "ann@example.org")
    assert not mentions("ann@example.org.uk", "ann@example.org")
    assert not mentions("ann@example.orgs", "ann@example.org")


def test_declarations_are_checked_against_the_tables() -> None:
    check_declarations(app.personal_data, app.tables)
    with pytest.raises(SchemaError):
        check_declarations([PersonalData("email", "nope", columns=("x",))], app.tables)
    with pytest.raises(SchemaError):
        check_declarations([PersonalData("email", "note", columns=("missing",))], app.tables)
    with pytest.raises(SchemaError):
        check_declarations([PersonalData("email", "note", key_column="body")], app.tables)
    with pytest.raises(SchemaError):  # one kind, two normalisations
        check_declarations([PersonalData("email", "note", columns=("cc",), normalize=str.lower),
                            PersonalData("email", "person", key_column="email")], app.tables)  # fmt: skip
    with pytest.raises(ValueError):
        PersonalData("email", "note")


def test_the_key_is_required_long_and_the_hash_depends_on_it() -> None:
    with pytest.raises(ErasureKeyError):
        erasure_key({})
    assert erasure_key({}, required=False) is None
    with pytest.raises(ErasureKeyError):
        erasure_key({ENV_KEY: "short"})
    h = subject_hash(KEY, "email", "ann@example.org")
    assert len(h) == 64 and "ann" not in h
    assert h == subject_hash(KEY, "email", "ann@example.org")
    assert h != subject_hash(b"j" * 32, "email", "ann@example.org")
    assert h != subject_hash(KEY, "person", "ann@example.org")


def test_screen_drops_rows_and_strips_cells_of_erased_subjects() -> None:
    screen = SubjectScreen(app.personal_data, KEY, [subject_hash(KEY, "email", "ann@example.org")])
    agent = NotesAgent()
    person = _event("person.set", email="ANN@example.org", name="Ann", plan="pro")
    assert map_event(agent, person, (), screen) == []
    other = _event("person.set", email="bo@example.org", name="Bo", plan="pro")
    assert map_event(agent, other, (), screen) == map_event(agent, other)
    note = _event("note.set", note_id="n1", body="hello Ann", cc="bo@example.org;Ann@example.org")
    assert map_event(agent, note, (), screen) == []  # every cell of the write is an erased one
    assert screen.suppressed == 2
    # a write with other cells keeps them
    strip = SubjectScreen([PersonalData("email", "note", columns=("cc",), separator=";", erase=("cc",))],
                          KEY, screen.hashes)  # fmt: skip
    up = Upsert(NOTE.name, {"note_id": "n1"}, {"body": "b", "cc": "ann@example.org"}, 5)
    assert strip(note, [up]) == [Upsert(NOTE.name, {"note_id": "n1"}, {"body": "b"}, 5)]
    log = LogState("log", {"k": "x"}, "sent", 1, "e1", 1, {"actor": "ann@example.org", "n": 1})
    by_log = SubjectScreen(
        [PersonalData("email", "log", columns=("actor",), erase=("actor",))], KEY, screen.hashes
    )
    assert by_log(note, [log]) == [LogState("log", {"k": "x"}, "sent", 1, "e1", 1, {"n": 1})]
    assert PERSON.name == "person"


def test_an_empty_deny_list_changes_nothing_and_a_failing_handle_is_still_the_message() -> None:
    screen = SubjectScreen(app.personal_data, KEY, [])
    e = _event("person.set", email="ann@example.org", name="Ann", plan="pro")
    assert map_event(NotesAgent(), e, (), screen) == map_event(NotesAgent(), e)
    with pytest.raises(MessageError):
        map_event(NotesAgent(), _event("note.set", note_id="n"), (), screen)
