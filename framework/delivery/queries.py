"""Queries over a ledger: each message's delivery status, and the messages not yet delivered.

A message is read from its origin row (the acknowledgements and the retry
progress live there). Its status is one of:

- ``delivered_first_time``: every expected consumer acknowledged, no retry needed;
- ``recovered_by_retry``: acknowledged by all after at least one retry;
- ``failed_despite_retries``: given up (retries exhausted, or the event was unretrievable);
- ``retrying``: retried, not yet acknowledged by all;
- ``unverified``: not acknowledged by all, and the verifier has not looked at it yet.

Origin rows superseded by a later registration of the same message id are skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import DeliveryError, LedgerEntry, check_consumer

__all__ = ["STATUSES", "MessageStatus", "status_of", "messages", "failed_messages"]

STATUSES = ("delivered_first_time", "recovered_by_retry", "failed_despite_retries", "retrying", "unverified")


def status_of(origin: LedgerEntry) -> str:
    """The delivery status of the message whose origin row is ``origin``."""
    if origin.delivered:
        return "recovered_by_retry" if origin.retries > 0 else "delivered_first_time"
    if origin.gave_up is not None:
        return "failed_despite_retries"
    return "retrying" if origin.retries > 0 else "unverified"


@dataclass(frozen=True)
class MessageStatus:
    """A message (its origin row) and its status."""

    entry: LedgerEntry
    status: str

    @property
    def missing(self) -> tuple[str, ...]:
        return self.entry.missing


def _window(ledger: DeliveryLedger, since: int | None, until: int | None) -> tuple[int, int]:
    """``[since, until)`` clamped to what the ledger can hold: at most one TTL either side of now."""
    now, ttl = ledger.now_us(), ledger.config.ttl_seconds * 1_000_000
    lo = max(now - ttl, 0 if since is None else since)
    hi = min(now + ttl, now + 1 if until is None else until)
    if lo >= hi:
        raise DeliveryError("since", f"the time range is empty (or outside the TTL window): [{lo}, {hi})")
    return lo, hi


async def messages(
    ledger: DeliveryLedger,
    *,
    since: int | None = None,
    until: int | None = None,
    source: str | None = None,
) -> AsyncIterator[MessageStatus]:
    """Every message captured in ``[since, until)`` (microseconds; default and bound: the TTL window)."""
    lo, hi = _window(ledger, since, until)
    cfg = ledger.config
    bucket = cfg.bucket_of(lo)
    while bucket < hi:
        for entry in await ledger.bucket(bucket):
            if not entry.is_origin or not lo <= entry.ref.captured_at < hi:
                continue
            if source is not None and entry.ref.source != source:
                continue
            if not entry.delivered:
                latest = await ledger.resolve(entry.ref.message_id)
                if latest is not None and latest != entry.ref:
                    continue
            yield MessageStatus(entry, status_of(entry))
        bucket += cfg.bucket_us


async def failed_messages(
    ledger: DeliveryLedger,
    *,
    consumer: str | None = None,
    source: str | None = None,
    since: int | None = None,
    until: int | None = None,
) -> list[MessageStatus]:
    """Every message not acknowledged by at least one expected consumer (or by ``consumer``)."""
    if consumer is not None and check_consumer(consumer) not in ledger.consumers:
        raise DeliveryError("consumer", f"{consumer!r} is not declared (one of {ledger.consumers})")
    out = []
    async for m in messages(ledger, since=since, until=until, source=source):
        if m.missing and (consumer is None or consumer in m.missing):
            out.append(m)
    return out
