"""Both example apps declare retention; the job runs on each through the test kit's Driver.

After a run at ``now``: no live cell of a data table (``retained_tables``) is older than its
tenant's cutoff, every newer cell is untouched, documents and the aggregates' contributions
equal a fresh projection of the store and each total the reduction of its group's
contributions, the notification table lists what went, and a replay of every original event
brings nothing back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from framework import App, Event
from framework.aggregates.tables import tables_of
from framework.core.aggregate import Aggregate, reduce
from framework.retention import DAY_US, RetentionPolicy, retained_tables
from framework.runtime.projector import read_documents
from framework.testing import Driver
from tests.retention.support import coordination, live_cells, retain


def support_desk() -> tuple[App, list[Event], int]:
    from examples.support_desk.app import app
    from examples.support_desk.generator import START_MICROS, generate_history
    from examples.support_desk.history import deliver

    return app, deliver(generate_history(5, 40).events, 5), START_MICROS + 7 * DAY_US


def activity_platform() -> tuple[App, list[Event], int]:
    from examples.activity_platform.app import app
    from examples.activity_platform.generator import START_MICROS, generate_history

    return app, list(generate_history(5, 300).events), START_MICROS + 15 * DAY_US


def _tenant_of(driver: Driver, policy: RetentionPolicy, table: str, key: dict) -> str:  # type: ignore[type-arg]
    for name in ("org_id", "tenant", "tenant_id"):  # the rule: a key column first
        if name in key:
            return str(key[name])
    owner = policy.tenant_from.get(table, table)
    schema = driver.store.schema(owner)
    row = driver.row(owner, {c.name: key[c.name] for c in schema.partition_key})
    values = {} if row is None else row.values()
    return str(values.get("org_id") or values.get("tenant") or "-")


@pytest.mark.parametrize("example", [support_desk, activity_platform])
def test_retention_of_example_app(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, events, middle = example()
    policy = app.retention
    assert policy is not None
    now_s = (middle + 365 * DAY_US) / 1e6  # the one-year tables' cutoff falls inside the history
    with Driver(app) as driver, coordination(tmp_path) as coord:
        driver.send(events)
        data = [t for t in app.tables if t.name in retained_tables(app)]
        before = {t.name: live_cells(driver, t.name) for t in data}
        tenants = {
            (t.name, k): _tenant_of(
                driver, policy, t.name, dict(zip([c.name for c in t.key_columns], k, strict=True))
            )
            for t in data
            for k in before[t.name]
        }
        contributed = {a.name: driver.contributions(a) for a in app.aggregates}
        assert all(contributed.values())
        run = retain(driver, coord, now_s)
        assert any(driver.contributions(a) != contributed[a.name] for a in app.aggregates)
        assert not run.skipped
        deleted = sum(r.rows_deleted + r.rows_trimmed for r in run.tables.values())
        assert deleted > 0
        for table in (t.name for t in data):
            after = live_cells(driver, table)
            for key, cells in before[table].items():
                cutoff = policy.cutoff(tenants[(table, key)], table, int(now_s * 1e6))
                kept = {c: v for c, v in cells.items() if cutoff is None or v[1] >= cutoff}
                assert after.get(key, {}) == kept, (table, key)
            assert set(after) <= set(before[table])
        # documents and contributions equal a fresh projection of the store, totals their reduction
        for p in app.views:
            docs = driver.contributions(p) if isinstance(p, Aggregate) else driver.documents(p)
            keys = {
                tuple(r.key[c.name] for c in p.partition_key): {
                    c.name: r.key[c.name] for c in p.partition_key
                }
                for t in p.tables
                for r in driver.rows(t.name)
            }
            fresh = {
                doc_id: (doc, v)
                for doc_id, doc, v in driver.run(read_documents(driver.store, p, list(keys.values())))
                if doc is not None
            }
            if not isinstance(p, Aggregate):
                assert docs == {d: (dict(doc), v) for d, (doc, v) in fresh.items()}
                continue
            assert docs == {d: dict(doc) for d, (doc, _) in fresh.items()}
            groups: dict[str, list[dict[str, float]]] = {}
            for contributions in docs.values():
                for gid, measures in contributions.items():
                    groups.setdefault(gid, []).append(measures)
            assert driver.totals(p.name) == {gid: reduce(p.measures, ms) for gid, ms in groups.items()}
        # notifications list the deleted rows
        entries = [
            e
            for e in driver.run(_entries(driver))
            if e.app == app.name and e.batch_id.startswith("retention")
        ]
        assert sum(e.deleted + e.updated for e in entries) == deleted
        # a replay of every original event brings nothing back
        # (an aggregate's tables by value: a replay announces its groups again, and their totals
        # are rewritten, unchanged, at the later announcements' offsets)
        derived = {t.name for a in app.aggregates for t in tables_of(a).all}
        stored = [t for t in app.tables if t.name not in derived]
        state = {t.name: live_cells(driver, t.name) for t in stored}
        documents = {p.name: driver.documents(p) for p in app.projections}
        aggregates = {a.name: (driver.contributions(a), driver.totals(a)) for a in app.aggregates}
        driver.send(events)
        assert {t.name: live_cells(driver, t.name) for t in stored} == state
        assert {p.name: driver.documents(p) for p in app.projections} == documents
        assert {a.name: (driver.contributions(a), driver.totals(a)) for a in app.aggregates} == aggregates


async def _entries(driver: Driver) -> list:  # type: ignore[type-arg]
    from framework.notifications import NOTIFICATION_TABLE, entry_from_row

    return [entry_from_row(r) async for r in driver.store.scan(NOTIFICATION_TABLE.name)]
