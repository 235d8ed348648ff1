"""Issue 22 case 7: retention never touches the framework's own tables (the erasure deny-list and
audit above all), whatever its policy; the data tables around them are retained as usual."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework import App
from framework.core.events import Event
from framework.erasure import AUDIT_TABLE, DENYLIST_TABLE, ENV_KEY, Subject, erase, verify
from framework.retention import DAY_US, RetentionPolicy, dry_run, ensure_tables, retained_tables
from framework.retention.bookkeeping import bookkeeping_tables
from framework.testing import Driver
from tests.erasure.notes_app import NotesAgent
from tests.erasure.notes_app import app as notes
from tests.retention.support import coordination, retain

KEY = b"retention-test-erasure-key-0123456789"
APP = App("notes", agents=[NotesAgent()], personal_data=notes.personal_data,
          retention=RetentionPolicy(default_days=5), notifications=True)  # fmt: skip
T0 = 1_700_000_000.0


def _person(n: int, email: str, at: float) -> Event:
    v = int(at * 1_000_000) + n
    return Event(f"p{n}", email, v, v, "person.set", {"email": email, "name": "N", "plan": "p"})


def test_no_framework_table_is_retained() -> None:
    names = set(retained_tables(APP))
    assert names == {"person", "note"}
    assert {DENYLIST_TABLE.name, AUDIT_TABLE.name} <= bookkeeping_tables(APP)
    assert not names & bookkeeping_tables(APP)


def test_the_deny_list_outlives_every_retention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, KEY.decode())
    subject = Subject("email", "ann@x.io")
    with Driver(APP, now=T0) as d, coordination(tmp_path) as coord:
        d.send([_person(1, "ann@x.io", T0 - 1), _person(2, "bo@x.io", T0 - 1)])
        d.run(erase(APP, subject, key=KEY, store=d.store, clock=lambda: T0))
        later = T0 + 30 * DAY_US / 1e6
        d.send(_person(3, "cy@x.io", later - 1))
        d.run(ensure_tables(d.store, APP))
        dry = d.run(dry_run(d.store, APP, now=later))
        assert set(dry.tables) == {"person", "note"}
        assert not retain(d, coord, later).skipped
        assert [r.key["email"] for r in d.rows("person")] == ["cy@x.io"]  # bo@ went by the policy
        assert len(d.rows(DENYLIST_TABLE.name)) == 1 and len(d.rows(AUDIT_TABLE.name)) == 1
        d.send(_person(4, "ann@x.io", later))  # the subject again, after the retention: still screened
        assert [r.key["email"] for r in d.rows("person")] == ["cy@x.io"]
        assert d.run(verify(APP, subject, key=KEY, store=d.store)) == []


def _support_desk() -> tuple[App, list[Event], str]:
    from examples.support_desk.app import app
    from examples.support_desk.generator import generate_history

    events = list(generate_history(5, 30).events)
    address = next(str(e.payload["requester_email"]) for e in events if "requester_email" in e.payload)
    return app, events, address


def _activity_platform() -> tuple[App, list[Event], str]:
    from examples.activity_platform.app import app
    from examples.activity_platform.generator import generate_history

    events = list(generate_history(5, 200).events)
    address = next(str(e.payload["participants"][0]) for e in events if e.payload.get("participants"))
    return app, events, address


@pytest.mark.parametrize("example", [_support_desk, _activity_platform])
def test_the_example_apps_deny_lists_outlive_retention(  # type: ignore[no-untyped-def]
    example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_KEY, KEY.decode())
    app, events, address = example()
    assert not set(retained_tables(app)) & bookkeeping_tables(app)
    subject = Subject("email", address.upper())
    with Driver(app) as d, coordination(tmp_path) as coord:
        d.send(events)
        d.run(erase(app, subject, key=KEY, store=d.store, index=d.index))
        later = max(e.version for e in events) / 1e6 + 3 * 365 * 86_400  # past every tenant's days
        run = retain(d, coord, later)
        assert not run.skipped and sum(r.rows_deleted for r in run.tables.values()) > 0
        assert len(d.rows(DENYLIST_TABLE.name)) == 1 and len(d.rows(AUDIT_TABLE.name)) == 1
        d.send(events)  # the archive again, after the retention: the subject stays out
        assert d.run(verify(app, subject, key=KEY, store=d.store, index=d.index)) == []
