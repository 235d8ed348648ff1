"""The verifier: find messages some consumer never acknowledged, retry them, checkpoint buckets.

One run reads the checkpoint (the last bucket known complete), walks every
bucket after it that ended more than ``grace_seconds`` ago, and settles each
row:

- its message is acknowledged by every expected consumer, given up, expired
  or superseded by a later registration: the row is done;
- it was already handed to a retry: the row waits for that retry's outcome;
- otherwise, below ``max_retries``: the original event is fetched back (from
  its topic/partition/offset, else through the ``refetch`` callback) and
  published again, then the retry is registered in the current bucket; at
  ``max_retries``, or when the event cannot be fetched at all, the message is
  given up and parked in the failed-events store.

The checkpoint moves to the last bucket of the complete prefix of the walk
(compare-and-set, never backwards). Every mark is an idempotent ledger write
made after the publication, so a crash at any point at worst publishes again,
and a second run over the same state changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from framework.coordination.checkpoints import Checkpoint, CheckpointConflict, CheckpointStore
from framework.delivery.kafka_io import Record, RecordFetcher, RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import DeliveryError, LedgerEntry, check_int
from framework.dlq import ParkedRecord

__all__ = [
    "Refetched",
    "Refetch",
    "DeadLetterSink",
    "VerifierConfig",
    "BucketOutcome",
    "VerifyResult",
    "Verifier",
]

log = logging.getLogger(__name__)

RETRY_HEADER = "converge-delivery-retry"
FAILED_DESPITE_RETRIES = "failed_despite_retries"
UNRETRIEVABLE = "unretrievable"
_DONE = frozenset({"delivered", "given_up", "superseded", "expired", "gave_up_now"})


@dataclass(frozen=True)
class Refetched:
    """An event obtained again from its source, and the topic to publish it to."""

    topic: str
    key: bytes | None
    value: bytes


#: Obtains an event the topic no longer holds (None: gone for good, so the message is given up).
Refetch = Callable[[LedgerEntry], Awaitable[Refetched | None]]


class DeadLetterSink(Protocol):
    """Where given-up messages go: ``DeadLetterWAL`` now, the dead-letter WAL through an adapter later."""

    async def park(self, ev: ParkedRecord) -> None: ...


@dataclass(frozen=True)
class VerifierConfig:
    """``grace_seconds`` after a bucket ends before it is verified; ``max_retries`` per message.

    ``lookback_seconds`` (default: the ledger TTL) bounds the first walk when
    there is no checkpoint; ``max_buckets`` bounds one run.
    """

    grace_seconds: int = 600
    max_retries: int = 3
    lookback_seconds: int | None = None
    max_buckets: int = 2016
    checkpoint_name: str | None = None

    def __post_init__(self) -> None:
        check_int(self.grace_seconds, 0, 10**7, "grace_seconds")
        check_int(self.max_retries, 0, 1000, "max_retries")
        check_int(self.max_buckets, 1, 10**6, "max_buckets")
        if self.lookback_seconds is not None:
            check_int(self.lookback_seconds, 1, 10**9, "lookback_seconds")


@dataclass
class BucketOutcome:
    """How the rows of one bucket settled in a run; ``open`` lists the unsettled (message id, state)."""

    bucket: int
    states: dict[str, int] = field(default_factory=dict)
    open: list[tuple[str, str]] = field(default_factory=list)

    def add(self, message_id: str, state: str) -> None:
        self.states[state] = self.states.get(state, 0) + 1
        if state not in _DONE:
            self.open.append((message_id, state))

    def settle_late(self, given_up: set[str]) -> None:
        """Rows waiting on a retry that this same run gave up are settled too."""
        late = [(m, s) for m, s in self.open if s == "waiting" and m in given_up]
        for m, s in late:
            self.open.remove((m, s))
            self.states[s] -= 1
            self.states["given_up"] = self.states.get("given_up", 0) + 1

    @property
    def complete(self) -> bool:
        return not self.open


@dataclass
class VerifyResult:
    """What one run did."""

    checkpoint_before: int | None
    checkpoint_after: int | None
    buckets: list[BucketOutcome] = field(default_factory=list)
    retried: list[tuple[str, int]] = field(default_factory=list)
    given_up: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"buckets walked {len(self.buckets)}, checkpoint {self.checkpoint_before} -> "
            f"{self.checkpoint_after}, retried {len(self.retried)}, given up {len(self.given_up)}, "
            f"errors {len(self.errors)}"
        )


class Verifier:
    """Verifies one ledger; ``run_once`` from the CLI or an in-worker timer."""

    def __init__(
        self,
        ledger: DeliveryLedger,
        checkpoints: CheckpointStore,
        publisher: RecordPublisher,
        *,
        fetcher: RecordFetcher | None = None,
        refetch: Refetch | None = None,
        dlq: DeadLetterSink | None = None,
        config: VerifierConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.checkpoints = checkpoints
        self.publisher = publisher
        self._own_fetcher = fetcher is None
        self.fetcher = fetcher or RecordFetcher(publisher.broker)
        self.refetch = refetch
        self.dlq = dlq
        self.config = config or VerifierConfig()
        self._clock = clock
        self.checkpoint_name = self.config.checkpoint_name or f"delivery/{ledger.config.table}"

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    async def checkpoint(self) -> Checkpoint | None:
        """The stored checkpoint of this ledger."""
        return await self.checkpoints.get(self.checkpoint_name)

    async def run_once(self) -> VerifyResult:
        """Verify every complete bucket after the checkpoint; advance it past the complete prefix."""
        lc = self.ledger.config
        now = self._now_us()
        cutoff = now - self.config.grace_seconds * 1_000_000
        cp = await self.checkpoint()
        before = None if cp is None else self._bucket_value(cp)
        if cp is None:
            lookback = self.config.lookback_seconds or lc.ttl_seconds
            cp = await self._initial(lc.bucket_of(max(0, now - lookback * 1_000_000)) - lc.bucket_us)
        start = self._bucket_value(cp) + lc.bucket_us
        result = VerifyResult(before, self._bucket_value(cp))
        current, bucket = lc.bucket_of(now), start
        while bucket + lc.bucket_us <= cutoff and len(result.buckets) < self.config.max_buckets:
            result.buckets.append(await self._verify_bucket(bucket, current, result))
            bucket += lc.bucket_us
        given_up = {mid for mid, _ in result.given_up}
        advance_to = None
        for outcome in result.buckets:
            outcome.settle_late(given_up)
            if not outcome.complete:
                break
            advance_to = outcome.bucket
        if advance_to is not None:
            result.checkpoint_after = await self._advance(cp, advance_to)
        log.info("delivery verification of %s: %s", lc.table, result.summary())
        return result

    def _bucket_value(self, cp: Checkpoint) -> int:
        try:
            return int(cp.value)
        except ValueError:
            raise DeliveryError("checkpoint", f"{cp.name} holds {cp.value!r}, not a bucket") from None

    async def _initial(self, bucket: int) -> Checkpoint:
        """Create the checkpoint just before the first bucket ever walked (or read the one a rival made)."""
        try:
            return await self.checkpoints.compare_and_set(self.checkpoint_name, str(bucket), None)
        except CheckpointConflict:
            found = await self.checkpoint()
            if found is None:
                raise
            return found

    async def _advance(self, cp: Checkpoint, bucket: int) -> int:
        """Compare-and-set the checkpoint to ``bucket`` unless it is already at or past it."""
        for _ in range(10):
            if self._bucket_value(cp) >= bucket:
                return self._bucket_value(cp)
            try:
                done = await self.checkpoints.compare_and_set(self.checkpoint_name, str(bucket), cp.version)
                return self._bucket_value(done)
            except CheckpointConflict:
                found = await self.checkpoint()
                if found is None:
                    raise
                cp = found
        raise CheckpointConflict(self.checkpoint_name, cp.version, None)

    async def _verify_bucket(self, bucket: int, current: int, result: VerifyResult) -> BucketOutcome:
        outcome = BucketOutcome(bucket)
        entries = sorted(await self.ledger.bucket(bucket), key=lambda e: -e.priority)
        for entry in entries:
            outcome.add(entry.ref.message_id, await self._settle(entry, current, result))
        return outcome

    async def _settle(self, entry: LedgerEntry, current: int, result: VerifyResult) -> str:
        origin = await self.ledger.origin(entry)
        if origin is None:
            return "expired"
        if origin.delivered:
            return "delivered"
        if origin.gave_up is not None:
            return "given_up"
        latest = await self.ledger.resolve(entry.ref.message_id)
        if latest is not None and latest != origin.ref:
            return "superseded"
        if entry.retried_in is not None:
            return "waiting"
        mid = entry.ref.message_id
        try:
            if entry.retry >= self.config.max_retries:
                await self._give_up(entry, origin, FAILED_DESPITE_RETRIES, result)
                return "gave_up_now"
            found = await self._fetch(origin)
            if found is None:
                await self._give_up(entry, origin, UNRETRIEVABLE, result)
                return "gave_up_now"
            topic, record = found
            headers = [(k, v) for k, v in record.headers if k != RETRY_HEADER]
            headers.append((RETRY_HEADER, str(entry.retry + 1).encode()))
            await self.publisher.publish(topic, record.key, record.value, headers)
            await self.ledger.record_retry(entry, origin, current)
        except Exception as exc:  # noqa: BLE001 - one message's trouble must not stop the walk
            log.warning("retry of %s failed: %s", mid, exc)
            result.errors.append((mid, f"{type(exc).__name__}: {exc}"))
            return "error"
        result.retried.append((mid, entry.retry + 1))
        return "retried"

    async def close(self) -> None:
        """Close the record fetcher the verifier created (the caller owns the other clients)."""
        if self._own_fetcher:
            await self.fetcher.close()

    async def _fetch(self, origin: LedgerEntry) -> tuple[str, Record] | None:
        """The original event and its topic: from Kafka by offset, else through ``refetch``."""
        loc = origin.location
        if loc is not None:
            record = await self.fetcher.fetch(loc)
            if record is not None:
                return loc.topic, record
        if self.refetch is not None:
            again = await self.refetch(origin)
            if again is not None:
                return again.topic, Record(again.key, again.value)
        return None

    async def _give_up(
        self, entry: LedgerEntry, origin: LedgerEntry, reason: str, result: VerifyResult
    ) -> None:
        """Park the message (best effort with its event), then mark it given up."""
        mid = entry.ref.message_id
        record: Record | None = None
        if reason != UNRETRIEVABLE:
            try:
                found = await self._fetch(origin)
                record = None if found is None else found[1]
            except Exception as exc:  # noqa: BLE001 - parking without the value is still parking
                log.warning("could not fetch %s for parking: %s", mid, exc)
        if self.dlq is not None:
            loc = origin.location
            await self.dlq.park(
                ParkedRecord(
                    pipeline=f"delivery:{self.ledger.config.table}",
                    topic=loc.topic if loc else "",
                    partition=loc.partition if loc else -1,
                    offset=loc.offset if loc else -1,
                    key=None if record is None else record.key,
                    value=None if record is None else record.value,
                    stage="delivery",
                    error_class=reason,
                    error=(
                        f"{origin.ref.source}/{mid} captured at {origin.ref.captured_at}: not acknowledged"
                        f" by {', '.join(origin.missing)} after {entry.retry} retries"
                    ),
                    parked_at=self._clock(),
                )
            )
        await self.ledger.record_given_up(entry, origin, reason)
        result.given_up.append((mid, reason))
