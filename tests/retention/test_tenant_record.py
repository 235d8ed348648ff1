"""Issue 22 case 8: a row whose tenant cell retention expired stays its tenant's.

A hub row names its tenant in an ``org_id`` cell written by its main record
only; insights add cells later. Tenant o1 keeps 10 days, the default 30.
Run 1 expires the main record (``org_id`` included) and keeps an insight
written 9 days before it; run 2, three days later, must expire the insight
by o1's 10 days, not keep it by the default's 30.
"""

from __future__ import annotations

from pathlib import Path

from framework import Event
from framework.retention import DAY_US
from framework.retention.tenants import TENANT_TABLE
from framework.testing import Driver
from tests.retention.hubs import app as APP
from tests.retention.support import coordination, live_cells, retain

RUN1 = 100 * DAY_US


def _event(kind: str, hub: str, version: int, **payload: str) -> Event:
    return Event(f"{kind}-{hub}-{version}", hub, version, version, f"hub.{kind}", {"text": "t", **payload})


def test_the_tenant_of_a_row_outlives_its_tenant_cell(tmp_path: Path) -> None:
    with Driver(APP) as d, coordination(tmp_path) as coord:
        d.send([_event("record", "h1", RUN1 - 12 * DAY_US, org="o1"),
                _event("insight", "h1", RUN1 - 9 * DAY_US),
                _event("note", "h1", RUN1 - 9 * DAY_US)])  # fmt: skip
        assert not retain(d, coord, RUN1 / 1e6).skipped
        assert live_cells(d, "hub") == {("h1",): {"insight": ("t", RUN1 - 9 * DAY_US)}}  # org_id went
        assert len(d.rows("hub_note")) == 1
        assert len(d.rows(TENANT_TABLE.name)) == 1
        assert not retain(d, coord, (RUN1 + 3 * DAY_US) / 1e6).skipped
        assert live_cells(d, "hub") == {} and live_cells(d, "hub_note") == {}  # 12 days old: o1's 10


def test_a_row_deleted_whole_keeps_its_tenant_for_later_cells(tmp_path: Path) -> None:
    with Driver(APP) as d, coordination(tmp_path) as coord:
        d.send(_event("record", "h2", RUN1 - 12 * DAY_US, org="o1"))
        assert not retain(d, coord, RUN1 / 1e6).skipped
        assert live_cells(d, "hub") == {}
        d.send(_event("insight", "h2", RUN1 - 5 * DAY_US))  # late, newer than o1's cutoff: kept
        assert not retain(d, coord, (RUN1 + 1 * DAY_US) / 1e6).skipped
        assert live_cells(d, "hub") == {("h2",): {"insight": ("t", RUN1 - 5 * DAY_US)}}
        assert not retain(d, coord, (RUN1 + 6 * DAY_US) / 1e6).skipped
        assert live_cells(d, "hub") == {}  # 11 days old: o1's, not the default's 30
