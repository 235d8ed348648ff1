"""An App as a real worker on the embedded stack: the delivery ack it declares, and its status.

Real parts: noida-db, a ``converge worker`` subprocess, a SQLite store that
holds the rows and the delivery ledger.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from framework import Event
from framework.delivery.ledger import DeliveryLedger
from framework.kafka_admin import ensure_topics, produce, wait_drained
from framework.local_stack import StackInfo
from framework.worker.processes import start_worker, stop_worker
from stores.sqlite import SqliteStore
from tests.app.ledgered import LEDGER

IDS = [f"m{i}" for i in range(6)]


async def _register(db: Path) -> None:
    async with SqliteStore(db) as store:
        ledger = DeliveryLedger(store, LEDGER)
        await ledger.ensure()
        for mid in IDS:
            await ledger.register(mid, "probe-source")


async def _acked(db: Path) -> dict[str, frozenset[str]]:
    async with SqliteStore(db) as store:
        ledger = DeliveryLedger(store, LEDGER)
        await ledger.ensure()
        out = {}
        for mid in IDS:
            ref = await ledger.resolve(mid)
            entry = None if ref is None else await ledger.read(ref)
            out[mid] = frozenset() if entry is None else entry.acked
        rows = [r async for r in store.scan("probe")]
        assert sorted(str(r.key["id"]) for r in rows) == IDS  # the agent's own writes are there too
        return out


def test_a_declared_delivery_consumer_acks_after_the_writes(stack: StackInfo, tmp_path: Path) -> None:
    topic, app_id = f"probe-{uuid.uuid4().hex[:8]}", f"ledgered-{uuid.uuid4().hex[:8]}"
    broker = f"kafka://{stack.kafka_bootstrap}"
    db = tmp_path / "wide.db"
    asyncio.run(_register(db))
    asyncio.run(ensure_topics(broker, {topic: 2}))
    events = [Event(mid, f"k{i}", 10 + i, 10 + i, "probe", {"n": i}) for i, mid in enumerate(IDS)]
    asyncio.run(produce(broker, topic, [(e.ordering_key.encode(), e.to_json()) for e in events]))
    env = {"PROBE_TOPIC": topic, "CONVERGE_APP_ID": app_id, "CONVERGE_WIDE_STORE": f"sqlite:///{db}"}
    worker = start_worker("tests.app.ledgered:app", tmp_path / "w", broker, env)
    try:
        assert asyncio.run(wait_drained(broker, app_id, topic, 90))
    finally:
        code = stop_worker(worker)
    assert code == 0, (tmp_path / "w" / "worker.log").read_text()[-3000:]
    assert asyncio.run(_acked(db)) == dict.fromkeys(IDS, frozenset({"search"}))  # not "audit": not ours
