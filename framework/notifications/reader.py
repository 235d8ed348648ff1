"""``NotificationReader``: a consumer's changes since its checkpoint, then commit.

The checkpoint (in a ``framework.coordination`` store, under
``converge/notifications/<consumer>``) is the position of the last entry the
consumer committed: ``(ingested_at, tenant, app, batch_id, table)``. ``read``
returns the entries after it, in that order, up to ``limit``; ``commit`` moves
the checkpoint to the last of them by compare-and-set, so two instances of
one consumer never both commit over each other.

Only entries ingested at least ``settle`` seconds ago are read: a writer
takes its ingestion time before its write lands, so a reader that ran ahead
of a slow write would skip it. Writers stamp entries when they write them and
write them again at a fresh stamp when the write ended more than
``late_after`` seconds after it (``framework.notifications.stamping``), so
every entry has a copy visible ``late_after`` after its stamp on the writer's
clock. The rule: every entry, however late it is written (a redone batch, a
slow store), reaches every consumer when ``settle`` exceeds ``late_after``
plus how far a writer's clock lags the reader's. A consumer whose checkpoint
is older than the ``retention`` gets ``NotificationGap``: entries after its
checkpoint may have expired, which would be a silent gap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Literal

from framework.coordination import Checkpoint, CheckpointStore
from framework.core.errors import ConvergeError
from framework.core.rows import cell_int
from framework.notifications.entries import Entry, entry_from_row
from framework.notifications.schema import (
    BUCKETS_TABLE,
    DAY,
    DEFAULT_RETENTION,
    NOTIFICATION_TABLE,
    day_of,
)
from stores.base import WideColumnStore

__all__ = ["NotificationReader", "NotificationGap", "Position", "CHECKPOINT_PREFIX", "DEFAULT_SETTLE"]

#: Position of an entry in the reading order.
Position = tuple[int, str, str, str, str]
#: Checkpoint name prefix of the consumers.
CHECKPOINT_PREFIX = "converge/notifications"
#: Default seconds an entry must be old before it is read.
DEFAULT_SETTLE = 30.0


class NotificationGap(ConvergeError):
    """The consumer's checkpoint is older than the notification retention."""

    def __init__(self, consumer: str, at: int, oldest: int, retention: int) -> None:
        super().__init__(
            f"consumer {consumer!r} fell behind the notification retention: its checkpoint is at "
            f"{_iso(at)}, older than {_iso(oldest)} (retention {retention / 86400:g} days), so entries "
            "after it may have expired and changes may be missing. Re-read the tables it follows in "
            f"full, then move its checkpoint: converge changes reset --consumer {consumer}"
        )
        self.consumer, self.at, self.oldest = consumer, at, oldest


def _iso(at: int) -> str:
    return datetime.fromtimestamp(at / 1e6, UTC).isoformat(timespec="seconds")


def _micros(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


class NotificationReader:
    """Reads one consumer's notification entries from ``store`` with its checkpoint in ``checkpoints``.

    ``start``: where a consumer without a checkpoint begins (``earliest``: the oldest
    retained entry; ``latest``: now). ``tenants``: read only these tenants (default all).
    ``clock``: epoch seconds.
    """

    def __init__(
        self,
        store: WideColumnStore,
        checkpoints: CheckpointStore,
        consumer: str,
        *,
        retention: int = DEFAULT_RETENTION,
        settle: float = DEFAULT_SETTLE,
        start: Literal["earliest", "latest"] = "earliest",
        tenants: Collection[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if start not in ("earliest", "latest"):
            raise ValueError(f"start must be 'earliest' or 'latest', got {start!r}")
        if retention <= 0 or settle < 0:
            raise ValueError("retention must be positive and settle non-negative")
        self.store, self.checkpoints, self.consumer = store, checkpoints, consumer
        self.name = f"{CHECKPOINT_PREFIX}/{consumer}"
        self.retention, self.settle, self.start = retention, settle, start
        self.tenants = None if tenants is None else frozenset(tenants)
        self.clock = clock
        self._seen: Checkpoint | None = None
        self._read = False

    async def ensure(self) -> None:
        """Create the notification tables if missing."""
        await self.store.ensure_table(NOTIFICATION_TABLE)
        await self.store.ensure_table(BUCKETS_TABLE)

    async def position(self) -> Position | None:
        """The committed position, or None when the consumer has no checkpoint."""
        self._seen = await self.checkpoints.get(self.name)
        self._read = True
        return None if self._seen is None else _decode(self._seen.value)

    async def read(self, limit: int = 1000, *, after: Position | None = None) -> list[Entry]:
        """Up to ``limit`` entries after the checkpoint (or after ``after``, the last entry of a
        page already read: ``entries[-1].position``), in reading order; NotificationGap when
        the checkpoint is older than the retention."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        now = _micros(self.clock())
        oldest, horizon = now - _micros(self.retention), now - _micros(self.settle)
        pos = await self.position()
        if pos is None:
            pos = ((oldest if self.start == "earliest" else horizon), "", "", "", "")
        elif pos[0] < oldest:
            raise NotificationGap(self.consumer, pos[0], oldest, self.retention)
        if after is not None:
            pos = max(pos, tuple(after))  # type: ignore[assignment]
        return await self._scan(pos, horizon, limit)

    async def commit(self, entries: Sequence[Entry]) -> Position | None:
        """Move the checkpoint to the last of ``entries`` (as returned by ``read``); the new
        position. CheckpointConflict when another instance committed since this one read."""
        if not entries:
            return None
        if not self._read:
            await self.position()
        return await self.commit_position(max(e.position for e in entries), self._seen)

    @property
    def seen(self) -> Checkpoint | None:
        """The checkpoint as the last ``read`` (or ``position``) found it."""
        return self._seen

    async def commit_position(self, last: Position, seen: Checkpoint | None) -> Position:
        """Move the checkpoint to ``last`` if it is still ``seen`` (None: absent), else
        CheckpointConflict; never backwards (the stored position stays when it is later)."""
        current = None if seen is None else _decode(seen.value)
        if current is not None and tuple(last) <= current:
            return current
        expected = None if seen is None else seen.version
        self._seen = await self.checkpoints.compare_and_set(self.name, _encode(tuple(last)), expected)  # type: ignore[arg-type]
        self._read = True
        return tuple(last)  # type: ignore[return-value]

    async def reset(self, at: float | None = None) -> Position:
        """Move the checkpoint to ``at`` (epoch seconds; default now), whatever it was: the
        consumer next reads entries ingested after it."""
        pos: Position = (_micros(self.clock() if at is None else at), "", "", "", "")
        current = await self.checkpoints.get(self.name)
        expected = None if current is None else current.version
        self._seen = await self.checkpoints.compare_and_set(self.name, _encode(pos), expected)
        self._read = True
        return pos

    async def _scan(self, pos: Position, horizon: int, limit: int) -> list[Entry]:
        candidates: list[tuple[int, str]] = []
        for day in range(day_of(pos[0]), day_of(horizon) + 1, DAY):
            for row in await self.store.read_partition(BUCKETS_TABLE.name, {"day": day}):
                bucket, tenant = cell_int(row.key["bucket"]), str(row.key["tenant"])
                width = row.values().get("width")
                if bucket > horizon or (self.tenants is not None and tenant not in self.tenants):
                    continue
                if width is not None and bucket + int(width) <= pos[0]:
                    continue  # every entry of it is older than the checkpoint
                candidates.append((bucket, tenant))
        candidates.sort()
        found: list[Entry] = []
        for i, (bucket, tenant) in enumerate(candidates):
            found += await self._partition(tenant, bucket, pos, horizon, limit)
            if i + 1 == len(candidates):
                break
            if len(found) >= limit:  # later buckets start at or after the next one's start
                found.sort(key=lambda e: e.position)
                if found[limit - 1].ingested_at < candidates[i + 1][0]:
                    break
        found.sort(key=lambda e: e.position)
        return found[:limit]

    async def _partition(
        self, tenant: str, bucket: int, pos: Position, horizon: int, limit: int
    ) -> list[Entry]:
        at = pos[0]
        if tenant == pos[1]:
            start: tuple[int | str, ...] = (at, *pos[2:])
        else:
            start = (at,) if tenant > pos[1] else (at + 1,)
        rows = await self.store.read_partition(
            NOTIFICATION_TABLE.name, {"tenant": tenant, "bucket": bucket}, start=start, end=(horizon,),
            limit=limit + 1,
        )  # fmt: skip
        entries = (entry_from_row(r) for r in rows)
        return [e for e in entries if e.position > pos and e.ingested_at <= horizon]


def _encode(pos: Position) -> str:
    return json.dumps(dict(zip(("ingested_at", "tenant", "app", "batch_id", "table"), pos, strict=True)))


def _decode(value: str) -> Position:
    d = json.loads(value)
    return (int(d["ingested_at"]), str(d["tenant"]), str(d["app"]), str(d["batch_id"]), str(d["table"]))
