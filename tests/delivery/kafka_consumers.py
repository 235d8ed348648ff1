"""Test consumers: real Kafka readers that acknowledge through ``DeliveryAckSink``, with fault injection."""

from __future__ import annotations

import json
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.core.events import Event, parse_event
from framework.delivery.acks import DeliveryAckSink
from framework.delivery.verifier import RETRY_HEADER


def event_bytes(message_id: str, n: int) -> bytes:
    """An event whose ``event_id`` is the ledger message id."""
    return Event(message_id, f"org:{n % 3}", 1_000 + n, 1_000 + n, "email_upserted", {"n": n}).to_json()


class AckingConsumer:
    """Reads a topic from the beginning (manual assignment, no group) and acks what it processes.

    ``drop(message_id, attempt)`` says which deliveries this consumer loses
    (``attempt`` is 0 for the original, n for the n-th retry).
    """

    def __init__(
        self, broker: str, topic: str, sink: DeliveryAckSink, drop: Callable[[str, int], bool]
    ) -> None:
        self.broker, self.topic, self.sink, self.drop = broker, topic, sink, drop
        self.seen: list[tuple[str, int]] = []
        self._consumer: AIOKafkaConsumer | None = None
        self._tps: list[TopicPartition] = []

    async def start(self) -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=self.broker, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await c.start()
        await c._client.force_metadata_update()  # noqa: SLF001 - fresh metadata for a new topic
        self._tps = [TopicPartition(self.topic, p) for p in sorted(c.partitions_for_topic(self.topic) or ())]
        c.assign(self._tps)
        await c.seek_to_beginning(*self._tps)
        self._consumer = c

    async def drain(self) -> None:
        """Process everything up to the current end of every partition."""
        c = self._consumer
        assert c is not None
        ends = await c.end_offsets(self._tps)
        while [tp for tp in self._tps if await c.position(tp) < ends[tp]]:
            batch = await c.getmany(timeout_ms=500)
            for records in batch.values():
                for r in records:
                    event = parse_event(r.value)
                    attempt = int(dict(r.headers or ()).get(RETRY_HEADER, b"0"))
                    self.seen.append((event.event_id, attempt))
                    if not self.drop(event.event_id, attempt):
                        await self.sink.write(event, [])

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()


def message_id_of(value: bytes) -> str:
    return json.loads(value)["event_id"]
