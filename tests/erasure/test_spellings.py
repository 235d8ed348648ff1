"""Issue 22 case 6: a subject is erased whatever the spelling its rows are keyed or written by.

The notes app keys ``person`` by the address as sent and declares the kind
``email`` with ``str.lower``; an erasure given any spelling finds every row
whose key or cells hold another spelling of the same address.
"""

from __future__ import annotations

from framework.core.events import Event
from framework.erasure.declare import Subject
from framework.erasure.run import erase
from framework.erasure.verify import verify
from framework.testing import Driver
from tests.erasure.notes_app import app


def _person(n: int, email: str) -> Event:
    return Event(f"p{n}", email.lower(), n, n, "person.set", {"email": email, "name": "Ann", "plan": "pro"})


def test_rows_keyed_by_the_subject_as_spelled_are_erased(erasure_key: bytes) -> None:
    with Driver(app) as d:
        d.send([_person(1, "Ann@X.io"), _person(2, "bo@x.io")])
        assert {r.key["email"] for r in d.rows("person")} == {"Ann@X.io", "bo@x.io"}
        subject = Subject("email", "Ann@X.io")
        report = d.run(erase(app, subject, key=erasure_key, store=d.store))
        assert report.rows == {"person": 1}
        assert [r.key["email"] for r in d.rows("person")] == ["bo@x.io"]
        assert d.run(verify(app, subject, key=erasure_key, store=d.store)) == []


def test_any_spelling_of_the_request_finds_every_spelling_of_the_rows(erasure_key: bytes) -> None:
    with Driver(app) as d:
        d.send([_person(n, e) for n, e in enumerate(("Ann@X.io", "ANN@x.IO", "ann@x.io", "bo@x.io"), 1)])
        note = Event("n1", "n1", 5, 5, "note.set", {"note_id": "n1", "body": "b", "cc": "bo@x.io;aNN@X.io"})
        d.send(note)
        subject = Subject("email", "aNn@x.Io")
        report = d.run(erase(app, subject, key=erasure_key, store=d.store))
        assert report.rows == {"person": 3} and report.cells == {"note": 1}
        assert [r.key["email"] for r in d.rows("person")] == ["bo@x.io"]
        assert d.run(verify(app, subject, key=erasure_key, store=d.store)) == []
        d.send([_person(6, "ANN@X.IO")])  # after the erasure: screened whatever its spelling
        assert [r.key["email"] for r in d.rows("person")] == ["bo@x.io"]
