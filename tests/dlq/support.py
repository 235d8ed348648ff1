"""Shared helpers of the dead-letter WAL tests: a settable clock and a record factory."""

from __future__ import annotations

from framework.dlq import ParkedRecord


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


def rec(
    offset: int,
    *,
    pipeline: str = "orders",
    event_type: str = "order_created",
    stage: str = "mapper",
    error_class: str = "ValidationError",
    topic: str = "src",
    key: bytes | None = b"k",
    value: bytes | None = None,
    parked_at: float = 0.0,
) -> ParkedRecord:
    """A parked record whose value names its offset unless given."""
    return ParkedRecord(
        pipeline=pipeline, topic=topic, partition=0, offset=offset, key=key,
        value=value if value is not None else b"v%d" % offset, stage=stage, error_class=error_class,
        error=f"bad event {offset}", parked_at=parked_at, event_type=event_type,
    )  # fmt: skip
