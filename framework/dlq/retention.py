"""Retention of parked events: deleting the segments of a WAL root that are past their partition's retention.

The policy (``dlq_retention``: its rules, the most-specific match, the ``forever`` default) is
``framework.core.dlq_retention.DeadLetterRetention``, re-exported here; it lives in the ground
layer because ``framework.settings`` checks the setting when settings resolve.

``expire`` deletes every segment that is not open and whose newest record (``last_ts``; an
empty segment's ``created_at``) is older, by ``store.clock()``, than the retention of its
partition: replayed, discarded and sealed alike. A sealed segment was never replayed, so
deleting it drops events for good: that is what a retention says, and ``expire`` counts them
apart and logs them at WARNING. A damaged segment is kept and reported (``converge dlq
salvage`` deals with it). An uploaded segment leaves an upload row behind, and the writer's
next pass deletes its object (``offload.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from framework.core.dlq_retention import DeadLetterRetention, RetentionRule
from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter, SegmentInfo, Status
from framework.dlq.lifecycle import _prune
from framework.dlq.record import Partition
from framework.dlq.store import DeadLetterStore

__all__ = ["expire", "ExpiryReport", "Expired", "PartitionExpiry", "DeadLetterRetention", "RetentionRule"]

log = logging.getLogger("framework.dlq")

_NOT_OPEN = (Status.SEALED, Status.REPLAYED, Status.DISCARDED)


@dataclass(frozen=True)
class Expired:
    """A segment past its partition's retention, and the rule that set it."""

    segment: SegmentInfo
    rule: RetentionRule


@dataclass(frozen=True)
class PartitionExpiry:
    """What expired of one partition: segments, records, bytes, and records never replayed (sealed)."""

    partition: Partition
    rule: RetentionRule
    segments: int
    records: int
    bytes: int
    unreplayed: int

    def describe(self) -> str:
        """One line: the partition, the rule, the counts."""
        never = f" ({self.unreplayed} never replayed)" if self.unreplayed else ""
        return (f"{'/'.join(self.partition)}: {self.segments} segments, {self.records} records{never}"
                f" (rule {self.rule.describe()})")  # fmt: skip


@dataclass(frozen=True)
class ExpiryReport:
    """The segments deleted (or, in a dry run, to delete) for retention, and the damaged ones kept."""

    expired: tuple[Expired, ...] = ()
    damaged: tuple[SegmentHealth, ...] = ()

    @property
    def segments(self) -> int:
        """Segments expired."""
        return len(self.expired)

    @property
    def records(self) -> int:
        """Records in them."""
        return sum(e.segment.count for e in self.expired)

    @property
    def bytes(self) -> int:
        """Bytes of their files."""
        return sum(e.segment.bytes for e in self.expired)

    @property
    def unreplayed(self) -> int:
        """Expired unreplayed records: those of sealed segments, never replayed nor discarded."""
        return sum(e.segment.count for e in self.expired if e.segment.status is Status.SEALED)

    def partitions(self) -> Iterator[PartitionExpiry]:
        """The counts per partition, in index order."""
        groups: dict[Partition, list[Expired]] = {}
        for e in self.expired:
            groups.setdefault(e.segment.partition, []).append(e)
        for part, es in groups.items():
            segs = [e.segment for e in es]
            yield PartitionExpiry(part, es[0].rule, len(segs), sum(s.count for s in segs),
                                  sum(s.bytes for s in segs),
                                  sum(s.count for s in segs if s.status is Status.SEALED))  # fmt: skip


def _newest(seg: SegmentInfo) -> float:
    return seg.last_ts if seg.last_ts is not None else seg.created_at


def past_retention(policy: DeadLetterRetention, seg: SegmentInfo, now: float) -> bool:
    """Whether the non-open ``seg`` is past its partition's retention at ``now``."""
    rule = policy.match(seg.partition)
    return rule is not None and rule.seconds is not None and now - _newest(seg) > rule.seconds


def expire(store: DeadLetterStore, policy: DeadLetterRetention, *, dry_run: bool = False) -> ExpiryReport:
    """Delete the non-open segments of ``store`` past their partition's retention (see the module docstring).

    Holds ``store.exclusive()``; each segment is read in full first and a damaged one is kept.
    With ``dry_run`` nothing changes and the report says what would be deleted.
    """
    if not policy.rules:
        return ExpiryReport()
    now = store.clock()
    expired: list[Expired] = []
    damaged: list[SegmentHealth] = []
    with store.exclusive():
        for seg in store.segments(SegmentFilter(statuses=_NOT_OPEN)):
            rule = policy.match(seg.partition)
            if rule is None or not past_retention(policy, seg, now):
                continue
            health = store.check(seg)
            if health is None:  # left the index meanwhile
                continue
            if health.damaged:
                damaged.append(health)
                continue
            expired.append(Expired(seg, rule))
            if dry_run:
                continue
            path = store.abspath(seg)
            path.unlink(missing_ok=True)
            store.index.delete(seg.id)
            _prune(store, path.parent)
    report = ExpiryReport(tuple(expired), tuple(damaged))
    if not dry_run:
        for p in report.partitions():
            if p.unreplayed:
                log.warning("dead-letter WAL: retention deleted records never replayed: %s", p.describe())
            else:
                log.info("dead-letter WAL: retention deleted %s", p.describe())
    return report
