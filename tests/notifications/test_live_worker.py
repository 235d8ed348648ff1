"""A live support-desk worker with notifications on: its entries list exactly the rows it wrote.

Real parts: a noida-db of its own (``fresh_stack``: the topics hold only this
test's events), a ``converge worker`` subprocess, a SQLite store, a SQLite
checkpoint file. The expected keys are those the app's own mappings give for
the produced events; the entries are read back through ``converge changes``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework.cli import main
from framework.local_stack import LocalStack
from framework.notifications.entries import changed_row, key_ident
from framework.runtime.mapping import map_event
from tests.notifications.live_desk import LiveDesk
from tests.notifications.notified_desk import app

SEED = 21


def _expected(events: dict[str, list]) -> set[tuple[str, str]]:  # type: ignore[type-arg]
    """(table, key) of every row the app's mappings write for ``events``, version marks aside."""
    marks = {p.version_table.name for p in app.views}
    out = set()
    for topic, evs in events.items():
        agent = app.route(evs[0], topic)
        for e in evs:
            for m in map_event(agent, e, app.views_of(agent)):
                if m.table not in marks:
                    out.add((m.table, key_ident(changed_row(m)[0])))
    return out


@pytest.mark.timeout(300)
def test_a_live_worker_notifies_each_micro_batch_of_exactly_the_rows_it_wrote(
    fresh_stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desk = LiveDesk.create(fresh_stack, tmp_path, SEED)
    events = desk.events
    produced = desk.produce()
    store = desk.env["CONVERGE_WIDE_STORE"]
    desk.run_worker()

    read = ["changes", "read", "--consumer", "snapshots", "--wide-store", store, "--settle", "0", "--json"]
    assert main([*read, "--limit", "100000", "--commit"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    listed = {(e["table"], key_ident(k)) for e in entries for k in e["keys"]}
    assert listed == _expected(events)  # every row written, and only those
    agents = {a.name for a in app.agents}
    batches = {e["batch_id"] for e in entries}
    assert {b.split(":")[0] for b in batches} <= agents and {e["app"] for e in entries} == {app.name}
    assert len(batches) < produced  # once per micro-batch, not per event
    assert all(
        not e["reread"] and e["inserted"] + e["updated"] + e["deleted"] == len(e["keys"]) for e in entries
    )
    assert sum(e["inserted"] for e in entries) >= len({(t, k) for t, k in listed if t == "ticket"})
    assert main(read) == 0  # committed: nothing new
    assert json.loads(capsys.readouterr().out)["entries"] == []
