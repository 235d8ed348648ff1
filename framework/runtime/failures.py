"""Succeeded, failed and skipped: per-partition bookkeeping of delivery failures.

A failed event keeps its relation key blocked; later events of that key wait
behind it (skipped) in arrival order while unrelated keys go on. The
scheduler's lanes hold the events; this module holds what operators and
metrics see: counts, and for each blocked key its head event, attempts, last
error and next retry time.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["BlockedKey", "PartitionFailures", "FailureBook"]


@dataclass
class BlockedKey:
    """A relation key held back by its failing head event."""

    offset: int
    attempts: int
    last_failure: float
    retry_at: float
    error: str
    sink: str
    destination_down: bool


@dataclass
class PartitionFailures:
    """One partition's queues: totals, blocked keys, and events skipped behind them."""

    succeeded: int = 0
    parked: int = 0
    retries: int = 0
    failed: dict[Hashable, BlockedKey] = field(default_factory=dict)
    skipped: dict[Hashable, int] = field(default_factory=dict)


class FailureBook:
    """The failure queues of every partition of one runtime."""

    def __init__(self) -> None:
        self._parts: dict[Hashable, PartitionFailures] = {}

    def part(self, tp: Hashable) -> PartitionFailures:
        p = self._parts.get(tp)
        if p is None:
            p = self._parts[tp] = PartitionFailures()
        return p

    def succeeded(self, tp: Hashable, relation: Hashable) -> None:
        self.succeeded_many(tp, [relation])

    def succeeded_many(self, tp: Hashable, relations: list[Hashable]) -> None:
        """``succeeded`` of each of ``relations`` in partition ``tp``."""
        p = self.part(tp)
        p.succeeded += len(relations)
        if p.failed:
            for relation in relations:
                p.failed.pop(relation, None)

    def parked(self, tp: Hashable, relation: Hashable) -> None:
        p = self.part(tp)
        p.parked += 1
        p.failed.pop(relation, None)

    def failed(self, tp: Hashable, relation: Hashable, blocked: BlockedKey) -> None:
        p = self.part(tp)
        p.retries += 1
        p.failed[relation] = blocked

    def set_skipped(self, tp: Hashable, relation: Hashable, waiting: int) -> None:
        p = self.part(tp)
        if waiting > 0:
            p.skipped[relation] = waiting
        else:
            p.skipped.pop(relation, None)

    def drop(self, tp: Hashable) -> None:
        """Forget a revoked partition."""
        self._parts.pop(tp, None)
