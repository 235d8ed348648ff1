"""Properties of the verifier over random ledgers, ack patterns and run schedules (real Kafka, SQLite).

Messages are registered without a topic location, so every retry goes
through the re-fetch callback (the test's "source system") and is published
to a real topic. Consumers ack some messages up front and some late; no
consumer acks a retry, so unacknowledged messages must end given up.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.delivery.kafka_io import RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerConfig, LedgerEntry
from framework.delivery.queries import messages
from framework.delivery.report import build_report
from framework.delivery.verifier import Refetched, Verifier, VerifierConfig
from framework.kafka_admin import end_offsets, ensure_topics
from framework.local_stack import StackInfo
from stores.sqlite.store import SqliteStore
from tests.delivery.conftest import MIN, T0, Clock, snapshot

CONSUMERS = ("search", "timeline")
T0_US = int(T0 * 1e6)
_acks = st.sampled_from([(), ("search",), ("timeline",), CONSUMERS])
_message = st.tuples(st.integers(0, 3), st.integers(0, 9), _acks, st.one_of(st.none(), st.integers(0, 4)))
_plan = st.fixed_dictionaries({
    "messages": st.lists(_message, min_size=1, max_size=8),
    "max_retries": st.integers(0, 2),
    "shards": st.integers(1, 3),
    "steps": st.lists(st.integers(3, 25), min_size=1, max_size=5),
})  # fmt: skip


@pytest.fixture(scope="module")
def topic(stack: StackInfo) -> str:
    name = f"props-{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(stack.kafka_bootstrap, {name: 1}))
    return name


async def _scenario(plan: dict, broker: str, topic: str, workdir: Path) -> None:
    clock = Clock()
    store = await SqliteStore.open(workdir / "wide.db", clock=clock)
    checkpoints = SqliteCheckpointStore(workdir / "cp.db")
    publisher = RecordPublisher(broker)
    closers: list = []
    try:
        ledger = DeliveryLedger(store, LedgerConfig(consumers=CONSUMERS, shards=plan["shards"]), clock=clock)
        await ledger.ensure()
        source: dict[str, bytes] = {}
        late: dict[int, list[str]] = {}
        for i, (b, minute, acked, late_after) in enumerate(plan["messages"]):
            mid = f"m{i}"
            source[mid] = mid.encode()
            await ledger.register(mid, "src", captured_at=int((T0 + b * 600 + minute * MIN) * 1e6))
            for consumer in acked:
                await ledger.ack(mid, consumer)
            if late_after is not None and len(acked) < 2:
                late.setdefault(late_after, []).append(mid)

        async def refetch(entry: LedgerEntry) -> Refetched | None:
            return Refetched(topic, None, source[entry.ref.message_id])

        max_retries = plan["max_retries"]
        config = VerifierConfig(max_retries=max_retries, lookback_seconds=3600)
        verifier = Verifier(ledger, checkpoints, publisher, refetch=refetch, clock=clock, config=config)
        closers.append(verifier.close)
        start = (await end_offsets(broker, topic))[0]
        retried: dict[str, int] = {}
        last_cp: int | None = None
        steps = plan["steps"] + [10] * (4 * (max_retries + 3))
        clock.now = T0 + 4 * 600
        for k, minutes in enumerate(steps):
            clock.advance(minutes * MIN)
            for mid in late.get(k, []):
                await ledger.ack(mid, "search")
                await ledger.ack(mid, "timeline")
            before = {m.entry.ref.message_id: m.entry async for m in messages(ledger, since=T0_US)}
            result = await verifier.run_once()
            for mid, n in result.retried:
                assert not before[mid].delivered, f"{mid} was delivered but retried"
                assert n == retried.get(mid, 0) + 1 <= max_retries
                retried[mid] = n
            assert result.errors == []
            cp = result.checkpoint_after
            assert last_cp is None or (cp is not None and cp >= last_cp), "the checkpoint moved backwards"
            if cp is not None:
                for b in range(int(T0 * 1e6), cp + 1, 600_000_000):
                    for entry in await ledger.bucket(b):
                        origin = await ledger.origin(entry)
                        assert origin is not None and (origin.delivered or origin.gave_up), (
                            f"checkpoint {cp} passed bucket {b} with unsettled {entry.ref.message_id}"
                        )
            last_cp = cp
            state = await snapshot(ledger)
            again = await verifier.run_once()
            assert (again.retried, again.given_up, again.checkpoint_after) == ([], [], cp)
            assert await snapshot(ledger) == state

        final = {m.entry.ref.message_id: m async for m in messages(ledger, since=T0_US)}
        never = {f"m{i}" for i, m in enumerate(plan["messages"]) if len(m[2]) < 2 and m[3] is None}
        for mid, m in final.items():
            if mid in never:
                assert (m.status, m.entry.gave_up, m.entry.retries) == (
                    "failed_despite_retries", "failed_despite_retries", max_retries,
                )  # fmt: skip
            else:
                assert m.entry.delivered
                assert m.status == ("recovered_by_retry" if retried.get(mid) else "delivered_first_time")
        assert (await end_offsets(broker, topic))[0] - start == sum(retried.values())
        assert (
            last_cp
            == int((T0 + 4 * 600 + sum(steps) * MIN) * 1e6) // 600_000_000 * 600_000_000 - 1_200_000_000
        )
        total = (await build_report(ledger, since=T0_US)).total
        assert (total.messages, total.failed_despite_retries) == (len(plan["messages"]), len(never))
        assert total.retrying == total.unverified == 0
    finally:
        for close in closers:
            await close()
        await publisher.close()
        await checkpoints.close()
        await store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=_plan)
def test_verifier_converges_idempotently_and_never_checkpoints_past_unsettled_rows(
    stack: StackInfo, topic: str, tmp_path_factory: pytest.TempPathFactory, plan: dict
) -> None:
    asyncio.run(_scenario(plan, stack.kafka_bootstrap, topic, tmp_path_factory.mktemp("vp")))
