"""``run_retention`` on a test kit ``Driver`` of an app with aggregates (the activity platform): the
aggregates' documents are contributions, not index documents, so the job takes the driver's
``aggregates`` beside its ``index``; without them it refuses before any work, naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.activity_platform.app import app
from examples.activity_platform.generator import generate_history
from framework.retention import RetentionError, run_retention
from framework.testing import Driver
from tests.retention.support import coordination, live_cells

HISTORY = generate_history(5, 60).events
LAST_S = max(e.version for e in HISTORY) / 1e6
DAY_S = 86_400


def _retain(d: Driver, root: Path, now_s: float, **targets: object) -> dict[str, dict[str, int]]:
    with coordination(root) as coord:
        run = d.run(run_retention(app, d.store, checkpoints=coord.checkpoints, locks=coord.locks,
                                  clock=lambda: now_s, **targets))  # type: ignore[arg-type]  # fmt: skip
    return run.reprojected


def test_without_the_aggregates_nothing_is_done(tmp_path: Path) -> None:
    with Driver(app) as d:
        d.send(HISTORY)
        hub = live_cells(d, "activity_hub")
        with pytest.raises(RetentionError, match=r"\['owner_daily', 'engagement_daily'\].*aggregates="):
            _retain(d, tmp_path, LAST_S + 800 * DAY_S, index=d.index)
        assert live_cells(d, "activity_hub") == hub  # refused before the store process ran


def test_a_tenant_expired_leaves_its_groups(tmp_path: Path) -> None:
    with Driver(app) as d:
        d.send(HISTORY)
        before = {a.name: d.totals(a) for a in app.aggregates}
        assert all(any("org-0001" in g for g in t) for t in before.values())
        # 200 days on: org-0001 (182 days) has expired, every other tenant (730) is kept
        reprojected = _retain(d, tmp_path, LAST_S + 200 * DAY_S, index=d.index, aggregates=d.aggregates)
        assert reprojected["activity_hub"]["documents"] > 0
        for a in app.aggregates:
            assert d.totals(a) == {g: t for g, t in before[a.name].items() if '"org-0001"' not in g}
            assert not [e for e, groups in d.contributions(a).items() if any("org-0001" in g for g in groups)]


def test_everything_expired_leaves_no_totals(tmp_path: Path) -> None:
    with Driver(app) as d:
        d.send(HISTORY)
        _retain(d, tmp_path, LAST_S + 800 * DAY_S, index=d.index, aggregates=d.aggregates)
        assert d.documents("activities") == {}
        for a in app.aggregates:
            assert d.totals(a) == {} and d.contributions(a) == {}
