"""The reference platform's worker, with its runtimes' status dumped for the tests that spawn it.

``converge worker tests.support.reference_worker:build`` runs the same worker as
``examples.activity_platform.app:app`` (settings from the environment) and writes
``{"pid": ..., "runtimes": Wiring.status()}`` to ``<data_dir>/status.json`` every 0.05 s
(fine-grained, so the fault suite can kill it after a chosen number of processed events).
"""

from __future__ import annotations

import faust

from examples.activity_platform.app import app
from framework.worker.wiring import build_worker
from tests.support.status_file import dump_status


def build() -> faust.App:
    """The reference app's Faust worker, dumping its status."""
    worker = build_worker(app)
    dump_status(worker, worker.converge.resources.settings.data_dir / "status.json",
                lambda: {"runtimes": worker.converge.status()}, every=0.05)  # fmt: skip
    return worker
