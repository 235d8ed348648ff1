"""A live support-desk worker running the change verifier (``CONVERGE_VERIFY``): index documents
deleted and edited behind its back before their changes settled are repaired by the worker
itself, and its figures reach ``/metrics`` and ``converge status``, those of the full sweep it
makes at its start (``CONVERGE_VERIFY_SWEEP``) too.

Real parts: a noida-db of its own (Kafka and Elasticsearch), a ``converge worker`` subprocess
with notifications on and its web server on a free loopback port, a SQLite store and
checkpoint file. The settle time (20 s) is longer than the worker takes to drain this history.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from framework.cli import main
from framework.local_stack import LocalStack, free_port
from framework.metrics.summary import fetch_metrics, summarize_verify
from framework.worker.processes import stop_worker
from tests.metrics import dashboard
from tests.notifications.live_desk import LiveDesk

SEED = 29
SETTLE = 20


@pytest.mark.timeout(300)
def test_a_worker_verifies_its_changes_repairs_damage_and_reports_it(
    fresh_stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    desk = LiveDesk.create(
        fresh_stack,
        tmp_path,
        SEED,
        CONVERGE_VERIFY=f"{SETTLE}s",
        CONVERGE_WEB_PORT=str(port),
        CONVERGE_VERIFY_SWEEP="1h",  # one full sweep, at the start
    )
    worker, log = desk.start_worker(), desk.log
    try:
        started = time.monotonic()
        desk.produce()
        desk.drain()
        written = desk.documents()
        assert len(written) > 3 and time.monotonic() - started < SETTLE, "drained after the settle time"
        desk.damage(written, sorted(written)[:3])
        url = f"http://127.0.0.1:{port}"
        summary = None
        deadline = time.monotonic() + SETTLE + 90
        while time.monotonic() < deadline:
            summary = summarize_verify(fetch_metrics(url))
            if summary is not None and sum(summary.repaired.values()) >= 3 and summary.behind_s is not None:
                break
            time.sleep(1)
        assert summary is not None, log.read_text()[-3000:]
        found = {c: n for c, n in summary.divergent.items() if n}
        assert found == {"missing": 2, "content": 1}, (summary, log.read_text()[-3000:])
        assert summary.repaired == {**dict.fromkeys(summary.repaired, 0), **found}
        assert not any(summary.parked.values()) and summary.errors == 0
        assert summary.documents >= len(written) and summary.lag_p50_s is not None
        assert summary.lag_p50_s >= SETTLE
        assert desk.documents() == written
        exported = {s.name for f in text_string_to_metric_families(fetch_metrics(url)) for s in f.samples}
        assert dashboard.verify_names() <= exported  # the dashboard's verifier panels have data
        assert main(["status", "--url", url, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["converge.verify"]["repaired"] == summary.repaired
        assert status["converge.verify"]["sweeps"] == 1 and status["converge.verify"]["last_sweep_age_s"] > 0
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]
