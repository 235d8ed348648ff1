"""Property: rows are kept by their tenant's days, also after their tenant cell expired (test kit).

Each example is a random history of ``hubs`` (tenants named by a cell of the
hub row, a note table taking its tenant from it), delivered in three parts
around two runs three days apart (shuffled, duplicated, replayed; see
``hubs``). After run 2, and again after the replays and a third run at the
same time, the store holds exactly the model's cells (``hub_model``).
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.testing import Driver
from tests.retention.hubs import RUN1, RUN2, app, hub_history, hub_model
from tests.retention.support import coordination, live_cells, retain

_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_rows_are_kept_by_their_tenants_days(rng: random.Random) -> None:
    hist = hub_history(rng, 0)
    want = hub_model(hist)
    first, between, replays = hist.parts
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp, Driver(app) as d, coordination(Path(tmp)) as coord:
        d.send(list(first))
        assert not retain(d, coord, RUN1 / 1e6).skipped
        d.send(list(between))
        assert not retain(d, coord, RUN2 / 1e6).skipped
        assert {t: live_cells(d, t) for t in want} == want
        d.send(list(replays) + list(hist.events))
        assert not retain(d, coord, RUN2 / 1e6).skipped
        assert {t: live_cells(d, t) for t in want} == want
        assert not d.parked
