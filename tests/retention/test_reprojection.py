"""A document retention changes gets a version above the one indexed, so the stream's projector,
which skips a document identical in version and content to the last one it wrote, never takes the
changed document for the old one (the retention property's failing case, found by hypothesis)."""

from __future__ import annotations

from pathlib import Path

from framework.testing import Driver
from tests.retention.support import coordination, retain
from tests.retention.toy import NOW_US, STEP, item_event, toy_app


def test_a_late_write_after_retention_reaches_the_document(tmp_path: Path) -> None:
    app = toy_app()  # o3 keeps its log 3 days: cutoff at step 28
    full = {"a": f"a{28 * STEP}", "states": ["s0"]}
    with Driver(app) as d, coordination(tmp_path) as coord:
        d.send([item_event("set", "o3", "i1", 28, "a"), item_event("log", "o3", "i1", 1, "a")])
        assert d.documents(app.projections[0]) == {"o3:i1": (full, 28 * STEP)}
        retain(d, coord, NOW_US / 1e6)  # the log entry of step 1 goes; the document changes
        ((doc, version),) = d.documents(app.projections[0]).values()
        assert doc == {"a": f"a{28 * STEP}"} and version > 28 * STEP
        d.send(item_event("log", "o3", "i1", 28, "a"))  # late, at the cutoff: kept
        assert d.documents(app.projections[0]) == {"o3:i1": (full, version)}
