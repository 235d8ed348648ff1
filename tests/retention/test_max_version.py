"""Retention of a document at ``MAX_VERSION`` (issue 42, item 5), on both example apps.

Events may carry ``MAX_VERSION`` (``framework.core.mutations``). The oldest event of each app's
history is delivered again at that version: its document's version is then ``MAX_VERSION``,
and a retention run that deletes the document's old rows needs its version mark "one above the
document's current version", which does not exist. The model, written here: the run finishes;
every cell written at ``MAX_VERSION`` is kept (it is above every cutoff); the document changes
and keeps ``MAX_VERSION``; every document in the index equals a fresh projection of what the
store holds; a second run and a replay of every event change nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from framework import App, Event
from framework.core.aggregate import Aggregate
from framework.core.mutations import MAX_VERSION
from framework.retention import DAY_US, retained_tables
from framework.runtime.projector import read_documents
from framework.testing import Driver
from tests.retention.support import coordination, live_cells, retain
from tests.retention.test_examples import activity_platform, support_desk


def _fresh(driver: Driver, app: App) -> dict[str, dict[str, tuple[dict, int]]]:  # type: ignore[type-arg]
    """Every projection's documents built now from the store's rows."""
    out = {}
    for p in app.projections:
        keys = {
            tuple(r.key[c.name] for c in p.partition_key): {c.name: r.key[c.name] for c in p.partition_key}
            for t in p.tables
            for r in driver.rows(t.name)
        }
        built = driver.run(read_documents(driver.store, p, list(keys.values())))
        out[p.name] = {doc_id: (dict(doc), v) for doc_id, doc, v in built if doc is not None}
    return out


def _at_max(driver: Driver, app: App) -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    return {
        (p.name, doc_id): doc
        for p in app.projections
        for doc_id, (doc, v) in driver.documents(p).items()
        if v == MAX_VERSION
    }


@pytest.mark.parametrize("example", [support_desk, activity_platform])
def test_a_document_at_max_version_is_retained_without_a_crash(
    example: Callable[[], tuple[App, list[Event], int]], tmp_path: Path
) -> None:
    app, events, middle = example()
    oldest = min(events, key=lambda e: e.version)
    maxed = dataclasses.replace(oldest, event_id=f"{oldest.event_id}-max", version=MAX_VERSION)
    now_s = (middle + 365 * DAY_US) / 1e6  # the one-year tables' cutoff falls inside the history
    data = [t.name for t in app.tables if t.name in retained_tables(app)]
    with Driver(app) as driver, coordination(tmp_path) as coord:
        assert driver.send([*events, maxed]) == []
        before = _at_max(driver, app)
        assert len(before) >= 1
        at_max = {t: {k: c for k, c in live_cells(driver, t).items() if any(
            wt == MAX_VERSION for _, wt in c.values())} for t in data}  # fmt: skip
        run = retain(driver, coord, now_s)
        assert not run.skipped
        assert sum(r.rows_deleted + r.rows_trimmed for r in run.tables.values()) > 0
        # every cell written at MAX_VERSION is kept
        for t, rows in at_max.items():
            after = live_cells(driver, t)
            for key, cells in rows.items():
                kept = {c: v for c, v in cells.items() if v[1] == MAX_VERSION}
                assert {c: v for c, v in after.get(key, {}).items() if c in kept} == kept, (t, key)
        # the document changed, kept its version, and the index holds what the store gives
        after_docs = _at_max(driver, app)
        assert set(after_docs) == set(before)
        assert any(after_docs[k] != before[k] for k in before), "retention changed no MAX_VERSION document"
        fresh = _fresh(driver, app)
        assert {p.name: driver.documents(p) for p in app.projections} == fresh
        for a in app.aggregates:
            assert isinstance(a, Aggregate)
            assert driver.contributions(a)  # the aggregates' documents still there
        # a second run (later) and a replay of every event leave the converged state
        retain(driver, coord, now_s + 1)
        assert {p.name: driver.documents(p) for p in app.projections} == _fresh(driver, app)
        settled = {p.name: driver.documents(p) for p in app.projections}
        driver.send([*events, maxed])
        assert {p.name: driver.documents(p) for p in app.projections} == settled
