"""The ack agent: external consumers acknowledge through a Kafka topic; writes are batched.

Records are taken in micro-batches (``noack_take``); each batch becomes one
ledger write, and its offsets are acknowledged only after that write
returned, so an ack is never lost (at least once; acks are idempotent). A
malformed record or an ack for an undeclared consumer is parked in the
failed-events store (when one is given) and skipped; an ack for a message the
ledger does not hold is counted and skipped. Transient store errors are
retried with a growing delay while the batch holds its partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import faust
import mode

from framework.delivery.acks import AckFormatError, parse_ack
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack
from framework.dlq import DeadLetterWAL, ParkedRecord
from stores.errors import TransientStoreError

__all__ = ["AckBatcher", "AckStats", "register_ack_agent"]

log = logging.getLogger(__name__)


@dataclass
class AckStats:
    """Counters of an ack agent."""

    batches: int = 0
    acked: int = 0
    unknown: int = 0
    malformed: int = 0
    retries: int = 0


@dataclass(frozen=True)
class RawAck:
    """One record of the acks topic and where it came from."""

    topic: str
    partition: int
    offset: int
    value: bytes | None


class AckBatcher:
    """Turns a batch of raw ack records into one durable ledger write."""

    def __init__(
        self,
        ledger: DeliveryLedger,
        *,
        dlq: DeadLetterWAL | None = None,
        retry_delay: float = 0.5,
        max_retry_delay: float = 10.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.ledger = ledger
        self.dlq = dlq
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self._sleep = sleep
        self.stats = AckStats()

    async def _park(self, raw: RawAck, exc: Exception) -> None:
        self.stats.malformed += 1
        log.warning("bad ack at %s[%s]@%s: %s", raw.topic, raw.partition, raw.offset, exc)
        if self.dlq is not None:
            await self.dlq.park(
                ParkedRecord(
                    pipeline=f"delivery_acks:{self.ledger.config.table}",
                    topic=raw.topic,
                    partition=raw.partition,
                    offset=raw.offset,
                    key=None,
                    value=raw.value,
                    stage="parse",
                    error_class=type(exc).__name__,
                    error=str(exc),
                    parked_at=time.time(),
                )
            )

    async def process(self, batch: Sequence[RawAck]) -> None:
        """Parse, park the bad records, write the good ones; returns when the write is durable."""
        acks: list[Ack] = []
        for raw in batch:
            try:
                if raw.value is None:
                    raise AckFormatError("ack", "empty record")
                ack = parse_ack(raw.value)
                if ack.consumer not in self.ledger.consumers:
                    raise AckFormatError("consumer", f"{ack.consumer!r} is not declared")
            except AckFormatError as exc:
                await self._park(raw, exc)
                continue
            acks.append(ack)
        self.stats.batches += 1
        if not acks:
            return
        delay = self.retry_delay
        while True:
            try:
                result = await self.ledger.ack_many(acks)
                break
            except TransientStoreError as exc:
                self.stats.retries += 1
                log.warning("ack batch of %d not written (%s); retrying in %.1fs", len(acks), exc, delay)
                await self._sleep(delay)
                delay = min(delay * 2, self.max_retry_delay)
        self.stats.acked += len(result.acked)
        self.stats.unknown += len(result.unknown)
        if result.unknown:
            log.info("acks for %d messages the ledger does not hold", len(result.unknown))


def register_ack_agent(
    app: faust.App,
    ledger: DeliveryLedger,
    topic: str,
    *,
    max_batch: int = 500,
    within: float = 0.5,
    dlq: DeadLetterWAL | None = None,
) -> AckBatcher:
    """Consume ``topic`` in ``app`` with an agent writing acks to ``ledger``; returns its batcher.

    The ledger tables must exist (``await ledger.ensure()``, e.g. in an
    ``app.on_startup`` hook or before the worker starts).
    """
    batcher = AckBatcher(ledger, dlq=dlq)
    channel = app.topic(topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    async def consume(stream: Any) -> None:
        async for events in stream.noack().noack_take(max_batch, within):
            raws = [
                RawAck(e.message.tp.topic, e.message.tp.partition, e.message.offset, e.message.value)
                for e in events
            ]
            await batcher.process(raws)
            for e in events:
                e.ack()

    app.agent(
        channel,
        name=f"converge.delivery_acks.{ledger.config.table}",
        supervisor_strategy=mode.CrashingSupervisor,
    )(consume)
    return batcher
