"""Tracing at the source: register a message in the ledger, publish it, record where it landed."""

from __future__ import annotations

from collections.abc import Iterable

from framework.delivery.kafka_io import RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import MessageRef

__all__ = ["TrackedProducer"]


class TrackedProducer:
    """Publishes messages that the ledger traces to every declared consumer.

    The message is registered *before* it is published, so a crash between
    the two leaves a registered, unacknowledged message that the verifier
    retries (through the re-fetch callback, as no offset was recorded). The
    second registration adds the topic, partition and offset.
    """

    def __init__(self, ledger: DeliveryLedger, publisher: RecordPublisher) -> None:
        self.ledger = ledger
        self.publisher = publisher

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        *,
        message_id: str,
        source: str,
        priority: int = 0,
        consumers: Iterable[str] | None = None,
    ) -> MessageRef:
        """Register, publish and locate one message; returns its ledger row key."""
        expect = None if consumers is None else tuple(consumers)
        ref = await self.ledger.register(message_id, source, priority=priority, consumers=expect)
        location = await self.publisher.publish(topic, key, value)
        await self.ledger.register(
            message_id,
            source,
            captured_at=ref.captured_at,
            priority=priority,
            location=location,
            consumers=expect,
        )
        return ref
