"""A late event on the embedded stack: a ``converge worker`` (real noida-db, SQLite store) writes an
owner's row, the ID mutation job converts the owner id (moves the row, publishes the map), and an
event that still carries the old id, published after that, is stored under the new id by the
worker itself: nothing is left under the old id and no further job turn is run; ``/metrics``
counts the resolved write; a worker on a fresh data dir reads the map again from its topic."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
from framework.idmutation import IdRequest, map_topic_of
from framework.idmutation.job import run_id_mutation
from framework.idmutation.topic import KafkaLog
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo, free_port
from framework.metrics.summary import fetch_metrics
from framework.worker.processes import start_worker, stop_worker
from stores.open import open_wide_store
from tests.idmutation.stream_app import NOTES, REQUESTS, TOPIC, activity, app

APP = "tests.idmutation.stream_app:app"


async def _owners(url: str) -> dict[tuple[str, str], dict]:
    store = await open_wide_store(url)
    try:
        for schema in app.tables:  # the worker may not have declared them yet
            await store.ensure_table(schema)
        return {(str(r.key["owner_id"]), str(r.key["activity_id"])): r.values()
                async for r in store.scan("owner_activity")}  # fmt: skip
    finally:
        await store.close()


def _wait(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n{log.read_text()[-3000:]}")


async def _job(url: str, root: Path, broker: str) -> dict:
    store = await open_wide_store(url)
    checkpoints, locks = SqliteCheckpointStore(root / "checkpoints.db"), SqliteDomainLocks(root / "jobs.db")
    try:
        run = await run_id_mutation(app, store, checkpoints=checkpoints, locks=locks, log=KafkaLog(broker),
                                    settle=0)  # fmt: skip
        return {"skipped": run.skipped}
    finally:
        await checkpoints.close()
        locks.close()
        await store.close()


def test_a_late_event_after_the_job_lands_under_the_new_id(stack: StackInfo, tmp_path: Path) -> None:
    broker = stack.kafka_bootstrap
    url = f"sqlite:///{tmp_path / 'wide.db'}"
    group = f"idm-late-{uuid.uuid4().hex[:6]}"
    tenant = f"t-{uuid.uuid4().hex[:6]}"  # the topics are shared by the session: own ids
    lead, contact = f"lead-{tenant}", f"contact-{tenant}"
    asyncio.run(ensure_topics(broker, {TOPIC: 2, NOTES: 2, REQUESTS: 1, map_topic_of(app.name): 1}))
    port = free_port()
    env = {"CONVERGE_WIDE_STORE": url, "CONVERGE_APP_ID": group, "CONVERGE_PARTITIONS": "2",
           "CONVERGE_WEB_PORT": str(port)}  # fmt: skip
    worker = start_worker(APP, tmp_path / "worker", broker, env)
    log = tmp_path / "worker" / "worker.log"
    try:
        before = activity(f"e1-{tenant}", tenant, lead, "a1", 100, body="before")
        asyncio.run(produce(broker, TOPIC, [(before.ordering_key.encode(), before.to_json())]))
        _wait(
            lambda: asyncio.run(_owners(url)).get((lead, "a1")) == {"body": "before"},
            40,
            "the first row",
            log,
        )
        request = IdRequest(150, f"r-{tenant}", tenant, "convert", lead, contact)
        asyncio.run(produce(broker, REQUESTS, [(None, json.dumps(request.to_dict()).encode())]))
        assert asyncio.run(_job(url, tmp_path, broker)) == {"skipped": {}}
        moved = {k: v for k, v in asyncio.run(_owners(url)).items() if k[0] in (lead, contact)}
        assert moved == {(contact, "a1"): {"body": "before"}}  # the job moved the row
        time.sleep(3)  # the worker's map feed reads the published entry (it polls every second)
        late = activity(f"e2-{tenant}", tenant, lead, "a2", 200, body="late")  # the old id, after the job
        asyncio.run(produce(broker, TOPIC, [(late.ordering_key.encode(), late.to_json())]))
        assert asyncio.run(wait_drained(broker, group, TOPIC, timeout=40))
        rows = {k: v for k, v in asyncio.run(_owners(url)).items() if k[0] in (lead, contact)}
        assert rows == {(contact, "a1"): {"body": "before"}, (contact, "a2"): {"body": "late"}}
        metrics = fetch_metrics(f"http://127.0.0.1:{port}")  # the step's counters in /metrics
        assert 'converge_id_resolved_total{runtime="owner_activity"} 1.0' in metrics
        assert 'converge_id_deleted_total{runtime="owner_activity"} 0.0' in metrics
    finally:
        assert stop_worker(worker) == 0
    # a worker on a fresh data dir reads the map again from its topic before it consumes
    worker = start_worker(APP, tmp_path / "fresh", broker, env)
    log = tmp_path / "fresh" / "worker.log"
    try:
        later = activity(f"e3-{tenant}", tenant, lead, "a3", 300, body="later")
        asyncio.run(produce(broker, TOPIC, [(later.ordering_key.encode(), later.to_json())]))
        _wait(lambda: asyncio.run(_owners(url)).get((contact, "a3")) == {"body": "later"}, 40, "a3", log)
        assert (lead, "a3") not in asyncio.run(_owners(url))
    finally:
        assert stop_worker(worker) == 0
