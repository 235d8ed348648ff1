"""The delivery ledger: register messages, record acknowledgements, read buckets.

Every write is an idempotent, versioned upsert, so any order or repetition of
registrations and acknowledgements converges to the same ledger:

- a registration writes at version = capture time;
- an acknowledgement writes ``ack_<consumer> = true`` at the same version;
- the verifier's retry and give-up marks write at capture time + retry number.

A message registered again with a later capture time is tracked from the new
registration on (the index points there); the older origin row is superseded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from framework.core.mutations import MAX_VERSION, CellValue, Upsert
from framework.core.rows import cell_int
from framework.core.schema import SchemaError, TableSchema
from framework.delivery.model import (
    Ack,
    DeliveryError,
    LedgerConfig,
    LedgerEntry,
    Location,
    MessageRef,
    ack_column,
    check_int,
    check_message_id,
    check_source,
)
from stores.base import WideColumnStore

__all__ = ["DeliveryLedger", "AckResult", "UnknownMessages"]

_PAGE = 1000


class UnknownMessages(DeliveryError):
    """Acknowledgements name messages the ledger does not hold; nothing was written."""

    def __init__(self, message_ids: Sequence[str]) -> None:
        super().__init__("message_id", f"{len(message_ids)} unknown message(s): {list(message_ids)[:10]}")
        self.message_ids = tuple(message_ids)


@dataclass(frozen=True)
class AckResult:
    """What an acknowledgement batch did: acks written, message ids not in the ledger."""

    acked: tuple[Ack, ...]
    unknown: tuple[str, ...]


def _location_cells(location: Location | None) -> dict[str, CellValue]:
    """The source-location cells of ``location`` (none when it is unknown)."""
    if location is None:
        return {}
    if not location.topic or location.partition < 0 or location.offset < 0:
        raise DeliveryError("location", f"needs a topic and non-negative partition/offset: {location}")
    return {"src_topic": location.topic, "src_partition": location.partition, "src_offset": location.offset}


def _merged(existing: TableSchema | None, desired: TableSchema) -> TableSchema:
    """``desired``, keeping the column order of ``existing`` and adding its missing columns at the end."""
    if existing is None:
        return desired
    have = {c.name for c in existing.columns}
    extra = tuple(c for c in desired.columns if c.name not in have)
    return TableSchema(
        name=existing.name,
        partition_key=existing.partition_key,
        clustering_key=existing.clustering_key,
        clustering_order=existing.clustering_order,
        columns=existing.columns + extra,
        default_ttl=existing.default_ttl,
    )


class DeliveryLedger:
    """A delivery ledger in ``store``; call ``ensure()`` once before use."""

    def __init__(
        self, store: WideColumnStore, config: LedgerConfig, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.config = config
        self._clock = clock

    @property
    def consumers(self) -> tuple[str, ...]:
        return self.config.consumers

    def now_us(self) -> int:
        """The ledger clock in integer microseconds."""
        return int(self._clock() * 1_000_000)

    async def ensure(self) -> None:
        """Declare the ledger and index tables; a newly declared consumer adds a column."""
        for desired in (self.config.ledger_schema(), self.config.index_schema()):
            try:
                existing: TableSchema | None = self.store.schema(desired.name)
            except SchemaError:
                existing = None
            await self.store.ensure_table(_merged(existing, desired))

    # -- registration -----------------------------------------------------

    async def register(
        self,
        message_id: str,
        source: str,
        *,
        captured_at: int | None = None,
        priority: int = 0,
        location: Location | None = None,
        consumers: Iterable[str] | None = None,
    ) -> MessageRef:
        """Trace a message; idempotent (call again with the returned ``captured_at`` to add a location).

        ``consumers`` (default: all declared) must all acknowledge it.
        """
        check_message_id(message_id)
        check_source(source)
        captured = self.now_us() if captured_at is None else captured_at
        check_int(captured, 0, MAX_VERSION - 1000, "captured_at")
        check_int(priority, -(2**31), 2**31 - 1, "priority")
        expect = self._expect(consumers)
        ref = MessageRef(
            self.config.bucket_of(captured), self.config.shard_of(message_id), source, captured, message_id
        )
        cells: dict[str, CellValue] = {
            "priority": priority, "retry": 0, "origin_bucket": ref.bucket, "expect": ",".join(expect),
            "retries": 0, **_location_cells(location),
        }  # fmt: skip
        ttl = self.config.ttl_seconds
        index: dict[str, CellValue] = {
            "bucket": ref.bucket,
            "shard": ref.shard,
            "source": source,
            "captured_at": captured,
        }
        await self.store.apply([
            Upsert(self.config.table, ref.key(), cells, captured, ttl),
            Upsert(self.config.index_table, {"message_id": message_id}, index, captured, ttl),
        ])  # fmt: skip
        return ref

    def _expect(self, consumers: Iterable[str] | None) -> tuple[str, ...]:
        if consumers is None:
            return self.consumers
        expect = tuple(dict.fromkeys(consumers))
        unknown = [c for c in expect if c not in self.consumers]
        if not expect or unknown:
            raise DeliveryError("consumers", f"must be a non-empty subset of {self.consumers}: {unknown}")
        return expect

    # -- acknowledgements -------------------------------------------------

    async def resolve(self, message_id: str) -> MessageRef | None:
        """The origin row of the message's latest registration, or None when unknown."""
        row = await self.store.read_row(self.config.index_table, {"message_id": check_message_id(message_id)})
        if row is None:
            return None
        v = row.values()
        if any(v.get(c) is None for c in ("bucket", "shard", "source", "captured_at")):
            return None
        bucket, shard, captured = cell_int(v["bucket"]), cell_int(v["shard"]), cell_int(v["captured_at"])
        return MessageRef(bucket, shard, str(v["source"]), captured, message_id)

    def check_acks(self, acks: Iterable[Ack]) -> list[Ack]:
        """The distinct acks, in order; DeliveryError when a consumer is not declared."""
        out = list(dict.fromkeys(acks))
        for a in out:
            if not isinstance(a, Ack):
                raise DeliveryError("ack", f"expected an Ack, got {type(a).__name__}")
            if a.consumer not in self.consumers:
                raise DeliveryError("consumer", f"{a.consumer!r} is not declared (one of {self.consumers})")
        return out

    async def ack_many(self, acks: Iterable[Ack], *, strict: bool = False) -> AckResult:
        """Record acknowledgements in one store write.

        Every ack is validated and every message resolved before anything is
        written. Unknown messages are skipped, or with ``strict`` the whole
        batch is refused with UnknownMessages.
        """
        wanted = self.check_acks(acks)
        ids = list(dict.fromkeys(a.message_id for a in wanted))
        refs = dict(zip(ids, await asyncio.gather(*(self.resolve(i) for i in ids)), strict=True))
        unknown = tuple(i for i in ids if refs[i] is None)
        if unknown and strict:
            raise UnknownMessages(unknown)
        cells: dict[str, dict[str, CellValue]] = {}
        for a in wanted:
            if refs[a.message_id] is not None:
                cells.setdefault(a.message_id, {})[ack_column(a.consumer)] = True
        writes = [
            Upsert(self.config.table, ref.key(), cells[i], ref.captured_at, self.config.ttl_seconds)
            for i, ref in refs.items()
            if ref is not None and i in cells
        ]
        if writes:
            await self.store.apply(writes)
        return AckResult(tuple(a for a in wanted if refs[a.message_id] is not None), unknown)

    async def ack(self, message_id: str, consumer: str) -> bool:
        """Acknowledge one message; False when the ledger does not know it."""
        result = await self.ack_many([Ack(message_id, consumer)])
        return bool(result.acked)

    # -- reads ------------------------------------------------------------

    async def read(self, ref: MessageRef) -> LedgerEntry | None:
        """The ledger row at ``ref``, or None."""
        row = await self.store.read_row(self.config.table, ref.key())
        return None if row is None else LedgerEntry.from_row(row, self.consumers)

    async def origin(self, entry: LedgerEntry) -> LedgerEntry | None:
        """The origin row of ``entry``'s message (``entry`` itself when it is one)."""
        return entry if entry.is_origin else await self.read(entry.origin_ref(self.config))

    async def bucket(self, bucket: int) -> list[LedgerEntry]:
        """Every live row of ``bucket`` (all shards), in clustering order per shard."""
        out: list[LedgerEntry] = []
        for shard in range(self.config.shards):
            start: tuple[str, int, str] | None = None
            while True:
                rows = await self.store.read_partition(
                    self.config.table, {"bucket": bucket, "shard": shard}, start=start, limit=_PAGE
                )
                full = len(rows) == _PAGE
                for row in rows:
                    key = (row.key["source"], row.key["captured_at"], row.key["message_id"])
                    if key == start:
                        continue
                    entry = LedgerEntry.from_row(row, self.consumers)
                    if entry is not None:
                        out.append(entry)
                if not full:
                    break
                last = rows[-1].key
                start = (str(last["source"]), cell_int(last["captured_at"]), str(last["message_id"]))
        return out

    # -- verifier marks ---------------------------------------------------

    async def record_retry(self, entry: LedgerEntry, origin: LedgerEntry, bucket: int) -> MessageRef:
        """Register retry ``entry.retry + 1`` of the message in ``bucket``; mark ``entry`` handed off."""
        n = entry.retry + 1
        r = entry.ref
        ref = MessageRef(bucket, r.shard, r.source, r.captured_at, r.message_id)
        cells = {
            "priority": origin.priority, "retry": n, "origin_bucket": origin.ref.bucket,
            "expect": ",".join(origin.expect), **_location_cells(origin.location),
        }  # fmt: skip
        version, ttl, table = r.captured_at + n, self.config.ttl_seconds, self.config.table
        await self.store.apply([
            Upsert(table, ref.key(), cells, version, ttl),
            Upsert(table, r.key(), {"retried_in": bucket}, version, ttl),
            Upsert(table, origin.ref.key(), {"retries": n}, version, ttl),
        ])  # fmt: skip
        return ref

    async def record_given_up(self, entry: LedgerEntry, origin: LedgerEntry, reason: str) -> None:
        """Mark the message as given up (``reason``) after ``entry``."""
        version, ttl = entry.ref.captured_at + entry.retry + 1, self.config.ttl_seconds
        await self.store.apply(
            [Upsert(self.config.table, origin.ref.key(), {"gave_up": reason}, version, ttl)]
        )
