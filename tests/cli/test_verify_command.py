"""``converge verify --once`` after a live worker: index documents deleted and edited behind the
framework's back are found and repaired; a document put ahead of its mark is parked in the
dead-letter log, from which ``converge dlq list`` shows it.

Real parts: a noida-db of its own (Kafka and Elasticsearch), a ``converge worker`` subprocess
of the support desk with notifications on, a SQLite store and checkpoint file.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.cli import main
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_worker
from stores.open import open_search_index
from tests.notifications.notified_desk import app

SEED = 23


async def _documents(es_url: str, alias: str) -> dict[str, tuple[dict[str, Any], int | None]]:
    index = open_search_index(es_url, "document")
    try:
        await index.refresh(alias)
        return {h.doc_id: (dict(h.source), h.version) async for h in index.scan(alias)}
    finally:
        await index.close()


async def _damage(es_url: str, alias: str, docs: dict[str, tuple[dict[str, Any], int | None]]) -> list[str]:
    """Delete two documents, edit one at its version, put one ahead of its mark; their ids."""
    ids = sorted(docs)[:4]
    index = open_search_index(es_url, "document")
    try:
        for doc_id in ids[:2]:
            await index.delete(alias, doc_id, int(docs[doc_id][1] or 0))
        doc, version = docs[ids[2]]
        await index.index(alias, ids[2], {**doc, "edited": "by hand"}, int(version or 0))
        doc, version = docs[ids[3]]
        await index.index(alias, ids[3], {**doc, "edited": "ahead"}, int(version or 0) + 1000)
        await index.refresh(alias)
    finally:
        await index.close()
    return ids


@pytest.mark.timeout(300)
def test_verify_once_repairs_what_was_damaged_and_parks_what_is_ahead(
    fresh_stack: LocalStack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert fresh_stack.info is not None
    broker, es_url = f"kafka://{fresh_stack.info.kafka_bootstrap}", fresh_stack.info.es_url
    app_id = f"support-desk-{uuid.uuid4().hex[:8]}"
    history = generate_history(SEED, 12, (f"{app_id}-a", f"{app_id}-b"))
    events = by_topic(deliver(history.events, SEED))
    asyncio.run(ensure_topics(broker, {t: 2 for t in app.topics()}))
    for topic, evs in events.items():
        asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in evs]))
    store = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    env = {"CONVERGE_ES_URL": es_url, "CONVERGE_ES_TOMBSTONES": "document", "CONVERGE_APP_ID": app_id,
           "CONVERGE_WIDE_STORE": store, "CONVERGE_PARTITIONS": "2", "CONVERGE_BROKER": broker}  # fmt: skip
    log = tmp_path / "worker" / "worker.log"
    worker = start_worker("tests.notifications.notified_desk:app", tmp_path / "worker", broker, env)
    try:
        for topic in events:
            assert asyncio.run(wait_drained(broker, app_id, topic, 150)), log.read_text()[-3000:]
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-3000:]
    alias = app.projections[0].alias
    written = asyncio.run(_documents(es_url, alias))
    assert len(written) > 4
    ids = asyncio.run(_damage(es_url, alias, written))

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CONVERGE_DATA_DIR", str(tmp_path / "verify"))
    dlq = tmp_path / "verify-dlq"
    verify = ["verify", "--app", "tests.notifications.notified_desk:app", "--once", "--settle", "0",
              "--recheck", "0", "--dlq-root", str(dlq), "--json"]  # fmt: skip
    assert main(verify) == 1  # a divergence was parked
    report = json.loads(capsys.readouterr().out)
    assert report["divergent"] == {"missing": 2, "orphaned": 0, "stale": 0, "ahead": 1, "content": 1}
    assert report["repaired"] == {"missing": 2, "orphaned": 0, "stale": 0, "ahead": 0, "content": 1}
    assert report["parked"]["ahead"] == 1 and report["verified"] >= len(written)
    after = asyncio.run(_documents(es_url, alias))
    assert {k: v for k, v in after.items() if k != ids[3]} == {
        k: v for k, v in written.items() if k != ids[3]
    }
    assert after[ids[3]][0]["edited"] == "ahead"  # not written: an operator decides

    assert main(["dlq", "show", "--root", str(dlq), "--stage", "verify", "--json"]) == 0
    (shown,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (shown["pipeline"], shown["error_class"]) == ("verify.tickets", "ahead")
    assert base64.b64decode(shown["key"]).decode() == ids[3]  # replayed, it re-projects the partition

    assert main(verify[:-3] + ["--dlq-root", str(tmp_path / "again"), "--json"]) == 0  # checkpointed
    again = json.loads(capsys.readouterr().out)
    assert again["entries"] == 0 and sum(again["divergent"].values()) == 0
