"""Both example apps with notifications on, through the test kit's ``Driver``.

Notifications change nothing of the data; every row the agents wrote is
listed in an entry of its table; a replay of the same events lists the same
keys again, and counts a row inserted only when it is not live.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import pytest

from framework import App, Event
from framework.notifications import Entry, NotificationConfig
from framework.notifications.entries import key_ident
from framework.testing import Driver


def notified(app: App) -> App:
    """``app`` with notifications on, every other declaration as it is."""
    on = copy.copy(app)
    on.notifications = NotificationConfig(count_inserts=True)
    return on


def support_desk() -> tuple[App, list[Event]]:
    from examples.support_desk.app import app
    from examples.support_desk.generator import generate_history
    from examples.support_desk.history import deliver

    return app, deliver(generate_history(3, 25).events, 3)


def activity_platform() -> tuple[App, list[Event]]:
    from examples.activity_platform.app import app
    from examples.activity_platform.generator import generate_history

    return app, list(generate_history(3, 150).events)


def listed(entries: list[Entry]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for e in entries:
        assert not e.reread and e.keys is not None
        assert e.inserted + e.updated + e.deleted == len(e.keys)
        out[e.table] |= {key_ident(k) for k in e.keys}
    return out


@pytest.mark.parametrize("example", [support_desk, activity_platform])
def test_entries_list_every_row_written_and_change_no_data(example) -> None:  # type: ignore[no-untyped-def]
    app, events = example()
    with Driver(app) as plain, Driver(notified(app)) as driver:
        plain.send(events)
        parked = driver.send(events)
        assert len(parked) == len(plain.parked)
        for table in app.tables:
            assert driver.rows(table.name) == plain.rows(table.name), table.name
        entries = driver.notifications()
        keys = listed(entries)
        written = {t.name for a in app.agents for t in a.tables}
        assert set(keys) <= written and keys
        for table in written:
            live = {key_ident(r.key) for r in driver.rows(table)}
            assert live <= keys.get(table, set()), f"{table}: rows without an entry"
        assert {e.app for e in entries} == {app.name}
        assert sum(e.inserted for e in entries) > 0
        # the same events again: the same keys, and every one of a row that exists now
        done = len(entries)
        driver.send(events)
        replay = driver.notifications()[done:]
        assert listed(replay) == keys
        for e in replay:  # inserted now only where the row is not live (deleted by a later event)
            assert e.keys is not None
            gone = [k for k in e.keys if driver.row(e.table, k) is None]
            assert e.inserted <= len(gone), e


def test_both_example_apps_declare_notifications() -> None:
    assert support_desk()[0].notifications is not None
    assert activity_platform()[0].notifications is not None


def test_a_driver_without_notifications_has_none() -> None:
    app = copy.copy(support_desk()[0])
    app.notifications = None
    with Driver(app) as driver, pytest.raises(RuntimeError, match="notifications off"):
        driver.notifications()
