"""The support desk end to end: a worker on the embedded stack converges to the oracle.

Real parts only: noida-db (Kafka and Elasticsearch protocols) from the
``stack`` fixture, a ``converge worker`` subprocess, a SQLite wide-column store.
The topics are the app's own, shared by the session, so this module holds one
worker run; its tenants are unique, and only their documents are compared.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from examples.support_desk.app import app
from examples.support_desk.generator import generate_history
from examples.support_desk.history import by_topic, deliver, enrichment_first
from examples.support_desk.oracle import expected_state
from framework import Event
from framework.dlq import DeadLetterStore
from framework.kafka_admin import committed_offsets, end_offsets, ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_worker
from tests.examples.support_desk.compare import divergences, read_run

SEED = 2024


async def _produce(broker: str, arrival: list[Event]) -> None:
    """A malformed message and an event of an unknown type first, under the key of a real ticket
    whose own events come after them, then the history topic by topic."""
    key = arrival[0].ordering_key
    unknown = Event("bad-type-1", key, 5, 5, "ticket.merged", {"into": "2"})
    bad = [(key.encode(), b'{"event_id": "oops"'), (key.encode(), unknown.to_json())]
    await produce(broker, "support.tickets", bad)
    for topic, events in by_topic(arrival).items():
        assert app.agent(app.topics()[topic]).topic == topic
        await produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events])


async def _stuck(broker: str, group: str, topic: str, log: Path) -> str:
    """Why ``topic`` did not drain: its end and committed offsets, and the worker's log."""
    ends = await end_offsets(broker, topic)
    committed = await committed_offsets(broker, group, topic, ends)
    return f"{topic} not drained: end offsets {ends}, committed {committed}\n{log.read_text()[-4000:]}"


@pytest.mark.slow
def test_a_worker_converges_to_the_oracle_and_parks_bad_events(stack: StackInfo, tmp_path: Path) -> None:
    app_id = f"support-desk-{uuid.uuid4().hex[:10]}"
    tenants = (f"{app_id}-north", f"{app_id}-south")
    history = generate_history(SEED, 80, tenants)
    arrival = deliver(history.events, SEED)
    assert len(arrival) > len(history.events) and enrichment_first(arrival) > 0
    broker = f"kafka://{stack.kafka_bootstrap}"
    store_url = f"sqlite:///{(tmp_path / 'wide.db').resolve()}"
    asyncio.run(ensure_topics(broker, {t: 4 for t in app.topics()}))
    asyncio.run(_produce(broker, arrival))
    env = {
        "CONVERGE_ES_URL": stack.es_url,
        "CONVERGE_ES_TOMBSTONES": "document",
        "CONVERGE_APP_ID": app_id,
        "CONVERGE_WIDE_STORE": store_url,
        "CONVERGE_PARTITIONS": "4",
    }
    worker = start_worker("examples.support_desk.app:app", tmp_path / "worker", broker, env)
    log = tmp_path / "worker" / "worker.log"
    try:
        for topic in app.topics():  # agent topics first: their change events are on the broker after them
            assert asyncio.run(wait_drained(broker, app_id, topic, 240)), asyncio.run(
                _stuck(broker, app_id, topic, log)
            )
    finally:
        code = stop_worker(worker)
    assert code == 0, log.read_text()[-4000:]

    parked = {e.record.event_type: e.record for e in DeadLetterStore(tmp_path / "worker" / "dlq").ordered()}
    assert set(parked) == {"unknown", "ticket.merged"}, parked
    assert parked["unknown"].stage == "parse" and "not JSON" in parked["unknown"].error
    assert parked["ticket.merged"].stage == "map"
    assert "'ticket.merged' is not an event type of 'support.tickets'" in parked["ticket.merged"].error

    (tickets, status_log, comments), docs = asyncio.run(
        read_run(store_url, stack.es_url, set(tenants), {t.ticket_id for t in history.truth.tickets.values()})
    )
    found = divergences(history, tickets, status_log, comments, docs)
    assert not found, "\n".join(map(str, found[:30]))
    erased = [t.ticket_id for t in history.truth.tickets.values() if t.erased_at is not None]
    assert erased and len(docs) == len(expected_state(history.truth).documents) > 50
    assert all("requester_email" not in docs[t][0] for t in erased if t in docs)
