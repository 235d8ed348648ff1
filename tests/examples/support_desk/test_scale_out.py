"""Two workers of the support desk in one consumer group converge to the oracle.

Real parts only: a noida-db of the test's own (so the app's topics hold this history alone),
two ``converge worker`` subprocesses with their own data dirs sharing one SQLite store. The
group settles before any event is produced (noida-db answers commits sent during a rebalance
with IllegalGeneration), as ``converge demo`` does.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver
from framework.dlq import DeadLetterStore
from framework.kafka_admin import (
    ensure_topics,
    group_assignments,
    produce,
    wait_all_drained,
    wait_group_settled,
)
from framework.local_stack import LocalStack
from framework.worker.processes import start_worker, stop_workers
from tests.examples.support_desk.compare import divergences, read_run

SEED = 77


@pytest.mark.slow
def test_two_workers_share_the_partitions_and_converge(fresh_stack: LocalStack, tmp_path: Path) -> None:
    info = fresh_stack.info
    assert info is not None
    app_id = f"support-desk-{uuid.uuid4().hex[:10]}"
    tenants = (f"{app_id}-east", f"{app_id}-west")
    history = generate_history(SEED, 80, tenants)
    arrival = deliver(history.events, SEED)
    broker = f"kafka://{info.kafka_bootstrap}"
    store_url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    topics = list(app.topics())  # agent topics first, then the change topics they feed
    asyncio.run(ensure_topics(broker, {t: 4 for t in topics}))
    env = {
        "CONVERGE_ES_URL": info.es_url,
        "CONVERGE_ES_TOMBSTONES": "document",
        "CONVERGE_APP_ID": app_id,
        "CONVERGE_WIDE_STORE": store_url,
        "CONVERGE_PARTITIONS": "4",
    }
    dirs = [tmp_path / f"worker{i}" for i in range(2)]
    procs = [start_worker("examples.support_desk.app:app", d, broker, env) for d in dirs]
    try:
        asyncio.run(wait_group_settled(broker, app_id, 2, timeout=120))
        _state, held = asyncio.run(group_assignments(broker, app_id))

        async def produce_all() -> None:
            for topic, events in by_topic(arrival).items():
                await produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events])

        asyncio.run(produce_all())
        drained = asyncio.run(wait_all_drained(broker, app_id, topics, timeout=240))
    finally:
        codes = stop_workers(procs)
    logs = "\n".join((d / "worker.log").read_text()[-3000:] for d in dirs)
    assert drained, logs
    assert codes == [0, 0], logs
    for topic in topics:  # every partition of every topic held by exactly one of the two
        assert sorted(p for h in held for p in h.get(topic, [])) == [0, 1, 2, 3], (topic, held)
    assert all(any(h.values()) for h in held)
    assert not [e for d in dirs for e in DeadLetterStore(d / "dlq").ordered()]

    (tickets, status_log, comments), docs = asyncio.run(
        read_run(store_url, info.es_url, set(tenants), {t.ticket_id for t in history.truth.tickets.values()})
    )
    found = divergences(history, tickets, status_log, comments, docs)
    assert not found, "\n".join(map(str, found[:30]))
    assert len(docs) > 50
