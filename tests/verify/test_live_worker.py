"""A live support-desk worker running the change verifier (``CONVERGE_VERIFY``): index documents
deleted and edited behind its back before their changes settled are repaired by the worker
itself, and its figures reach ``/metrics`` and ``converge status``.

Real parts: a noida-db of its own (Kafka and Elasticsearch), a ``converge worker`` subprocess
with notifications on and its web server on a free loopback port, a SQLite store and
checkpoint file. The settle time (20 s) is longer than the worker takes to drain this history.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.cli import main
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack, free_port
from framework.metrics.summary import fetch_metrics, summarize_verify
from framework.worker.processes import start_worker, stop_worker
from tests.cli.test_verify_command import _documents
from tests.metrics import dashboard
from tests.notifications.notified_desk import app

SEED = 29
SETTLE = 20


@pytest.mark.timeout(300)
def test_a_worker_verifies_its_changes_repairs_damage_and_reports_it(
    fresh_stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fresh_stack.info is not None
    broker, es_url = f"kafka://{fresh_stack.info.kafka_bootstrap}", fresh_stack.info.es_url
    app_id = f"support-desk-{uuid.uuid4().hex[:8]}"
    history = generate_history(SEED, 12, (f"{app_id}-a", f"{app_id}-b"))
    events = by_topic(deliver(history.events, SEED))
    asyncio.run(ensure_topics(broker, {t: 2 for t in app.topics()}))
    port = free_port()
    store = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    env = {"CONVERGE_ES_URL": es_url, "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": app_id,
           "CONVERGE_WIDE_STORE": store, "CONVERGE_PARTITIONS": "2", "CONVERGE_VERIFY": f"{SETTLE}s",
           "CONVERGE_WEB_PORT": str(port)}  # fmt: skip
    log = tmp_path / "worker" / "worker.log"
    worker = start_worker("tests.notifications.notified_desk:app", tmp_path / "worker", broker, env)
    try:
        started = time.monotonic()
        for topic, evs in events.items():
            asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs]))
        for topic in events:
            assert asyncio.run(wait_drained(broker, app_id, topic, 150)), log.read_text()[-3000:]
        alias = app.projections[0].alias
        written = asyncio.run(_documents(es_url, alias))
        assert len(written) > 3 and time.monotonic() - started < SETTLE, "drained after the settle time"
        ids = sorted(written)[:3]
        asyncio.run(_damage(es_url, alias, written, ids))
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
        assert asyncio.run(_documents(es_url, alias)) == written
        exported = {s.name for f in text_string_to_metric_families(fetch_metrics(url)) for s in f.samples}
        assert dashboard.verify_names() <= exported  # the dashboard's verifier panels have data
        assert main(["status", "--url", url, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["converge.verify"]["repaired"] == summary.repaired
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]


async def _damage(es_url: str, alias: str, docs: dict, ids: list[str]) -> None:  # type: ignore[type-arg]
    from stores.open import open_search_index

    index = open_search_index(es_url, "document")
    try:
        for doc_id in ids[:2]:
            await index.delete(alias, doc_id, int(docs[doc_id][1] or 0))
        doc, version = docs[ids[2]]
        await index.index(alias, ids[2], {**doc, "edited": "by hand"}, int(version or 0))
        await index.refresh(alias)
    finally:
        await index.close()
