"""The reference platform's worker, with its runtimes' status dumped for the tests that spawn it.

``converge worker tests.support.reference_worker:build`` runs the same worker as
``examples.activity_platform.app:app`` (settings from the environment) and writes
``{"pid": ..., "runtimes": Wiring.status(), "verify": ...}`` to ``<data_dir>/status.json`` every
0.05 s (fine-grained, so the fault suite can kill it after a chosen number of processed events);
``verify``: the change verifier's ``VerifyStats.to_dict()`` when ``CONVERGE_VERIFY`` runs one.
"""

from __future__ import annotations

from typing import Any

import faust

from examples.activity_platform.app import app
from framework.worker.wiring import build_worker
from tests.support.status_file import dump_status


def build() -> faust.App:
    """The reference app's Faust worker, dumping its status."""
    worker = build_worker(app)

    def status() -> dict[str, Any]:
        stats = worker.converge.verifier.stats if worker.converge.verifier is not None else None
        return {"runtimes": worker.converge.status(), "verify": None if stats is None else stats.to_dict()}

    dump_status(worker, worker.converge.resources.settings.data_dir / "status.json", status, every=0.05)
    return worker
