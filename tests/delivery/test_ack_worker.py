"""A real worker: the agent's ack sink, the acks-topic agent, HTTP acks on Faust's web, the verifier timer."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.delivery.acks import encode_ack
from framework.delivery.kafka_io import RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack, LedgerEntry, MessageRef
from framework.delivery.producer import TrackedProducer
from framework.dlq import DeadLetterWAL
from framework.kafka_admin import ensure_topics, produce
from framework.local_stack import StackInfo, free_port
from framework.worker.processes import start_worker, stop_worker
from stores.sqlite.store import SqliteStore
from tests.delivery.kafka_consumers import event_bytes
from tests.delivery.worker_app import CONFIG

TOKEN = "worker-token-0123456789abcdef"
IDS = [f"w{i}" for i in range(6)]
NO_ENTRY = LedgerEntry(MessageRef(0, 0, "-", 0, "-"), 0, 0, 0, ())


async def _post(url: str, acks: list[Ack], token: str | None) -> int:
    body = {"acks": [{"message_id": a.message_id, "consumer": a.consumer} for a in acks]}
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as resp:
        return resp.status


def _post_when_up(url: str, acks: list[Ack], token: str | None, timeout: float = 90.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return asyncio.run(_post(url, acks, token))
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _origins(db: Path) -> dict[str, LedgerEntry | None]:
    """The origin row of every test message, read through a connection of our own."""

    async def read() -> dict[str, LedgerEntry | None]:
        store = SqliteStore(db)
        try:
            ledger = DeliveryLedger(store, CONFIG)
            out = {}
            for mid in IDS:
                ref = await ledger.resolve(mid)
                out[mid] = None if ref is None else await ledger.read(ref)
            return out
        finally:
            await store.close()

    return asyncio.run(read())


def _acked(db: Path) -> dict[str, frozenset[str]]:
    return {mid: frozenset() if e is None else e.acked for mid, e in _origins(db).items()}


def test_worker_acks_through_sink_topic_and_http(stack: StackInfo, tmp_path: Path) -> None:
    broker = stack.kafka_bootstrap
    topic, acks_topic = f"probe-{uuid.uuid4().hex[:8]}", f"acks-{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(broker, {topic: 2, acks_topic: 1}))
    db = tmp_path / "wide.db"

    async def publish() -> None:
        store = SqliteStore(db)
        ledger = DeliveryLedger(store, CONFIG)
        await ledger.ensure()
        publisher = RecordPublisher(broker)
        for n, mid in enumerate(IDS):
            await TrackedProducer(ledger, publisher).send(topic, f"org:{n % 3}".encode(), event_bytes(mid, n),
                                                          message_id=mid, source="exchange")  # fmt: skip
        await publisher.close()
        await store.close()

    asyncio.run(publish())
    port = free_port()
    env = {
        "DELIVERY_TOPIC": topic,
        "DELIVERY_ACKS_TOPIC": acks_topic,
        "DELIVERY_APP_ID": f"dp-{uuid.uuid4().hex[:6]}",
        "DELIVERY_TOKEN": TOKEN,
        "DELIVERY_WEB_PORT": str(port),
        "CONVERGE_WIDE_STORE": f"sqlite:///{db}",
    }
    data = tmp_path / "worker"
    proc = start_worker("tests.delivery.worker_app:build", data, f"kafka://{broker}", env)
    try:
        records = [(None, encode_ack(Ack(mid, "timeline"))) for mid in IDS[:3]]
        records += [(None, b"{garbage"), (None, encode_ack(Ack("ghost", "timeline")))]
        asyncio.run(produce(broker, acks_topic, records))
        url = f"http://127.0.0.1:{port}/delivery/acks"
        assert _post_when_up(url, [Ack("w3", "timeline"), Ack("w4", "timeline")], None) == 401
        assert _post_when_up(url, [Ack("w3", "timeline"), Ack("w4", "timeline")], TOKEN) == 200
        want = {mid: frozenset({"search", "timeline"}) for mid in IDS[:5]} | {"w5": frozenset({"search"})}
        deadline = time.monotonic() + 90
        while _acked(db) != want and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _acked(db) == want
        while not (_origins(db)["w5"] or NO_ENTRY).retries and time.monotonic() < deadline:
            time.sleep(0.5)  # the verifier timer retries w5, which timeline never acknowledges
        assert (_origins(db)["w5"] or NO_ENTRY).retries >= 1
    finally:
        code = stop_worker(proc)
    assert code == 0, (data / "worker.log").read_text()[-3000:]
    failed = DeadLetterWAL(data / "dlq")
    parsed = [(e.record.value, e.record.stage) for e in failed.iterate() if e.record.stage == "parse"]
    assert parsed == [(b"{garbage", "parse")]
    checkpoints = SqliteCheckpointStore(data / "checkpoints.db")
    assert checkpoints.get_sync("delivery/delivery_ledger") is not None
    checkpoints.close_sync()
    failed.close()


def test_timer_refuses_a_non_positive_interval() -> None:
    import faust

    from framework.delivery.timer import register_verifier_timer

    with pytest.raises(ValueError, match="interval"):
        register_verifier_timer(faust.App("timer-check"), object(), interval=0)  # type: ignore[arg-type]
