"""Property: after retention, the store holds exactly the data newer than each tenant's cutoff.

Random histories (sets, row deletes and state-log entries around the
cutoff, three tenants with different policies) are delivered in a random
order, with replays of events already sent; the retention job runs at one
point of the delivery, the rest (late events, replays) comes after. An
independent oracle merges every delivered write by Cassandra's rules (the
highest version wins; a row delete shadows writes at or below its version)
and keeps only the cells at or after the tenant's cutoff.

- Every partition (of a table) that was live when the job ran equals the oracle at once:
  nothing older than the cutoff comes back, whatever arrives later.
- After a second run at the same time, every partition equals the oracle
  (a partition the store first saw after the job is sealed by the next run).
- The index holds exactly the documents a fresh projection of the store builds.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework import Event
from framework.runtime.projector import read_documents
from framework.testing import Driver
from tests.retention.support import coordination, live_cells, retain
from tests.retention.toy import NOW_US, POLICY, STEP, item_event, toy_app

#: Coordination files per example: on tmpfs when there is one (fsyncs there cost nothing).
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None
Cells = dict[tuple[Any, ...], dict[str, tuple[Any, int]]]

_event = st.builds(
    item_event,
    st.sampled_from(["set", "set", "log", "log", "delete"]),
    st.sampled_from(["o1", "o2", "o3"]),
    st.sampled_from(["i1", "i2", "i3"]),
    st.integers(1, 39),  # steps around the cutoffs (20 for items, 28 for o3's log)
    st.sampled_from(["a", "b"]),
    st.sampled_from([0, 0, 0, -1, 1]),  # a microsecond either side of a cutoff
)


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[Event], int]:
    """Events in a delivery order with replays, and where in it the job runs."""
    events = draw(st.lists(_event, min_size=1, max_size=25, unique_by=lambda e: e.event_id))
    order = draw(st.permutations(events))
    replays = draw(st.lists(st.sampled_from(events), max_size=8))
    sent = list(order) + replays
    return sent, draw(st.integers(0, len(sent)))


def oracle(events: Sequence[Event]) -> dict[str, Cells]:
    """The cells of every delivered write that no delete shadows and the tenant's policy keeps."""
    cells: dict[str, Cells] = {"item": {}, "item_log": {}}
    deleted: dict[tuple[Any, ...], int] = {}
    for e in events:
        org, item = e.ordering_key.split(":")
        v = e.version
        if e.type == "item.delete":
            deleted[(org, item)] = max(deleted.get((org, item), -1), v)
        elif e.type == "item.set":
            col = e.payload["column"]
            row = cells["item"].setdefault((org, item), {})
            if col not in row or row[col][1] < v:
                row[col] = (f"{col}{v}", v)
        else:
            cells["item_log"].setdefault((org, item, e.occurred_at, e.event_id), {})["state"] = (
                f"s{v % 3}",
                v,
            )
    out: dict[str, Cells] = {}
    for table, rows in cells.items():
        out[table] = {}
        for key, row in rows.items():
            cutoff = POLICY.cutoff(str(key[0]), table, NOW_US)
            floor = deleted.get(key[:2], -1) if table == "item" else -1
            kept = {c: cv for c, cv in row.items() if cv[1] > floor and (cutoff is None or cv[1] >= cutoff)}
            if kept:
                out[table][key] = kept
    return out


def _documents_match_store(driver: Driver) -> None:
    p = driver.app.projections[0]
    keys = {(r.key["org_id"], r.key["item_id"]) for t in p.tables for r in driver.rows(t.name)}
    fresh = driver.run(
        read_documents(driver.store, p, [{"org_id": o, "item_id": i} for o, i in sorted(keys)])
    )
    want = {doc_id: (dict(doc), v) for doc_id, doc, v in fresh if doc is not None}
    assert driver.documents(p) == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deliveries())
def test_stored_rows_equal_the_oracle_for_any_delivery(case: tuple[list[Event], int]) -> None:
    sent, at = case
    app = toy_app()
    want = oracle(sent)
    with (
        tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp,
        Driver(app) as driver,
        coordination(Path(tmp)) as coord,
    ):
        driver.send(sent[:at])
        sealed = {
            t: {(r.key["org_id"], r.key["item_id"]) for r in driver.rows(t)} for t in ("item", "item_log")
        }
        assert not retain(driver, coord, NOW_US / 1e6).skipped
        driver.send(sent[at:])
        for table in ("item", "item_log"):
            got = {k: v for k, v in live_cells(driver, table).items() if k[:2] in sealed[table]}
            assert got == {k: v for k, v in want[table].items() if k[:2] in sealed[table]}, table
        _documents_match_store(driver)
        assert not retain(driver, coord, NOW_US / 1e6).skipped
        assert {t: live_cells(driver, t) for t in ("item", "item_log")} == want
        _documents_match_store(driver)


def test_a_cell_exactly_at_the_cutoff_stays_and_one_below_goes(tmp_path: Path) -> None:
    with Driver(toy_app()) as driver, coordination(tmp_path) as coord:
        driver.send([item_event("set", "o1", "i1", 19, "a"), item_event("set", "o1", "i1", 20, "b")])
        retain(driver, coord, NOW_US / 1e6)
        assert live_cells(driver, "item") == {("o1", "i1"): {"b": ("b" + str(20 * STEP), 20 * STEP)}}
        driver.send(item_event("set", "o1", "i1", 19, "a"))  # late, older than the cutoff: shadowed
        assert live_cells(driver, "item") == {("o1", "i1"): {"b": ("b" + str(20 * STEP), 20 * STEP)}}
