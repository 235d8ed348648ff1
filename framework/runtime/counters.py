"""Runtime counters, read by metrics, the demo and the tests."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Counters"]


@dataclass
class Counters:
    """Monotonic totals and current gauges of one runtime instance."""

    received: int = 0
    processed: int = 0
    parked: int = 0
    retried: int = 0
    acked: int = 0
    batches: int = 0
    last_batch_size: int = 0
    in_flight: int = 0
    blocked_keys: int = 0
    pauses: int = 0
    resumes: int = 0
    crashes: int = 0
    lag: int = 0
    #: micro-batches written by the batch path, and those that fell back to the per-key path
    batch_writes: int = 0
    batch_fallbacks: int = 0
    #: records dropped at intake, never run nor acked: of a revoked partition, of an older
    #: consumer generation, or delivered again below an offset already taken
    stale_dropped: int = 0
    #: periods of ``group_join_timeout`` the consumer waited for its first assignment
    group_join_stalls: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)
