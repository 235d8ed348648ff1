"""Exact-duplicate skipping: event ids applied recently, per partition, in a local RocksDB.

A redelivery after a crash or rebalance, or a producer's retry, brings events
that were already applied. Writing them again changes nothing (versioned
upserts are idempotent), but it costs the sinks' round trips. With a
``DuplicateFilter`` the runtime skips an event whose id *and* exact bytes it
applied before, within ``retention_s`` and among the last ``max_ids`` of its
partition. It never skips by version: with partial updates a lower-version
event may carry cells no higher one wrote, so only the very same event is
known to be applied. Losing the filter (a new data dir, a partition moved to
another worker) only costs writes, never correctness.

Values are raw bytes (rocksdict raw mode): nothing read back is unpickled.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

from framework.core.events import Event
from framework.runtime.work import Work

__all__ = ["DedupeConfig", "DuplicateFilter", "digest"]

log = logging.getLogger(__name__)
_STAMP = struct.Struct(">d")


@dataclass(frozen=True)
class DedupeConfig:
    """``max_ids``: ids kept per partition; ``retention_s``: how long an id is kept."""

    max_ids: int = 100_000
    retention_s: float = 24 * 3600.0

    def __post_init__(self) -> None:
        if self.max_ids < 1 or self.retention_s <= 0:
            raise ValueError("max_ids and retention_s must be positive")


def digest(raw: bytes | None) -> bytes:
    """The fingerprint of an event's exact bytes."""
    return hashlib.blake2b(raw or b"", digest_size=16).digest()


class DuplicateFilter:
    """Which events (id and bytes) were applied recently, per partition."""

    def __init__(
        self, path: Path, config: DedupeConfig | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config or DedupeConfig()
        self._clock = clock
        path.mkdir(parents=True, exist_ok=True)
        self._options = Options(raw_mode=True)
        self._db = Rdict(str(path), options=self._options)
        self._order: dict[bytes, deque[tuple[float, bytes]]] = {}
        self.skipped = 0

    @staticmethod
    def _prefix(tp: Hashable) -> bytes:
        return str(tp).encode() + b"\x00"

    def seen(self, tp: Hashable, event_id: str, fingerprint: bytes) -> bool:
        """True when this very event (same id, same bytes) was applied in partition ``tp``
        within the retention."""
        value = self._db.get(self._prefix(tp) + event_id.encode())
        if value is None or value[_STAMP.size :] != fingerprint:
            return False
        stamp: float = _STAMP.unpack_from(value)[0]
        return self._clock() - stamp <= self.config.retention_s

    def record(self, applied: Iterable[tuple[Hashable, str, bytes]]) -> None:
        """Remember events applied durably: ``(tp, event_id, fingerprint)``; forget the oldest
        past ``max_ids`` per partition and those past the retention."""
        now = self._clock()
        batch = WriteBatch(raw_mode=True)
        touched: set[bytes] = set()
        for tp, event_id, fingerprint in applied:
            prefix = self._prefix(tp)
            key = prefix + event_id.encode()
            batch.put(key, _STAMP.pack(now) + fingerprint)
            self._ids(prefix).append((now, key))
            touched.add(prefix)
        for prefix in touched:
            order = self._ids(prefix)
            horizon = now - self.config.retention_s
            while order and (len(order) > self.config.max_ids or order[0][0] < horizon):
                _, old = order.popleft()
                batch.delete(old)
        self._db.write(batch)

    def skips(self, work: Work, event: Event) -> bool:
        """True (and counted) when ``event``, read from ``work``, is known as applied: skip it.
        An unreadable filter answers False: it only saves work, so the event runs."""
        try:
            if not self.seen(work.tp, event.event_id, digest(work.value)):
                return False
        except Exception as exc:  # noqa: BLE001 - the filter only saves work: run the event
            log.warning("duplicate filter unreadable (%r): running the event", exc)
            return False
        self.skipped += 1
        return True

    def remember(self, done: Iterable[tuple[Work, Event]]) -> None:
        """``record`` the events durably done; a failure only loses a later skip (logged)."""
        try:
            self.record((w.tp, e.event_id, digest(w.value)) for w, e in done)
        except Exception as exc:  # noqa: BLE001 - the events are done; only a later skip is lost
            log.warning("duplicate filter not updated (%r)", exc)

    def _ids(self, prefix: bytes) -> deque[tuple[float, bytes]]:
        """The partition's ids oldest first, loaded from disk on first use."""
        order = self._order.get(prefix)
        if order is None:
            found: list[tuple[float, bytes]] = []
            it = self._db.iter()
            it.seek(prefix)
            while it.valid() and it.key().startswith(prefix):
                found.append((_STAMP.unpack_from(it.value())[0], it.key()))
                it.next()
            del it
            found.sort()
            order = self._order[prefix] = deque(found)
        return order

    def close(self) -> None:
        self._db.close()
