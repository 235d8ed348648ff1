"""The worker applies ``dlq_retention`` (``CONVERGE_DLQ_RETENTION``) on a timer.

A worker whose setting holds rules runs a retention pass every ``every`` seconds (an hour by
default), off the event loop: ``framework.dlq.retention.expire`` deletes the segments that are
not open and whose newest record is older than their partition's retention, as ``converge dlq
cleanup`` does (replayed, discarded and sealed alike; a damaged one is kept and logged).

- On the worker's own WAL root (every segment without object storage; with it, the sealed
  segments not uploaded yet), under the root's ``ops.lock``.
- With object storage, on the bucket too, at most one worker at a time: the pass takes the
  lease ``leases/retention`` (``framework.dlq.leases``, the segments' leases; an expired one
  is taken over, so a worker that died holding it blocks the others only until it expires)
  and skips the bucket while another worker holds it. It then claims the segments past their
  retention, each under its own lease, like every command that changes segments, so it never
  deletes a segment a ``converge dlq`` command is working on.

An error (an object-storage outage, a closing store) ends the pass and is logged; the next one
tries again. Replayed and discarded segments still inside their retention are left to
``converge dlq cleanup`` and its grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.dlq.bucket import BucketView
from framework.dlq.index import SegmentFilter, Status
from framework.dlq.retention import DeadLetterRetention, ExpiryReport, expire, past_retention
from framework.dlq.wal import DeadLetterWAL
from framework.settings import Settings

__all__ = ["RETENTION_LEASE", "DEFAULT_EVERY_S", "RetentionPass", "apply_retention", "register_dlq_retention"]

log = logging.getLogger("framework.dlq")

#: The lease (``leases/retention``) one worker at a time holds while it applies retention to the bucket.
RETENTION_LEASE = "retention"
DEFAULT_EVERY_S = 3600.0
_NOT_OPEN = SegmentFilter(statuses=(Status.SEALED, Status.REPLAYED, Status.DISCARDED))


@dataclass(frozen=True)
class RetentionPass:
    """What one pass deleted locally and in the bucket (None: no bucket, or another worker had it)."""

    local: ExpiryReport
    bucket: ExpiryReport | None
    busy: bool = False


def apply_retention(
    wal: DeadLetterWAL, policy: DeadLetterRetention, *, clock: Callable[[], float] = time.time
) -> RetentionPass:
    """One retention pass over ``wal``'s root and, with object storage, the bucket (see the module doc)."""
    local = expire(wal.store, policy)
    objects = wal.store.objects
    if objects is None or not policy.rules:
        return RetentionPass(local, None)
    with BucketView(objects, clock=clock) as view, view.leases.hold([RETENTION_LEASE]) as held:
        if held.busy:
            log.info("dead-letter retention: another worker holds the bucket's pass (%s)", RETENTION_LEASE)
            return RetentionPass(local, None, busy=True)
        now = clock()
        names = [s.path for s in view.store.segments(_NOT_OPEN) if past_retention(policy, s, now)]
        if not names:
            return RetentionPass(local, ExpiryReport())
        with view.claim(names=names) as claim:
            report = expire(claim.store, policy)
        for b in claim.busy:
            log.info("dead-letter retention: %s left out, another command holds it", b.name)
    for h in report.damaged:
        log.error("dead-letter retention: damaged segment kept: %s", h.describe())
    return RetentionPass(local, report)


def register_dlq_retention(
    worker: Any,
    dlq: Callable[[], DeadLetterWAL | None],
    settings: Settings,
    every: float = DEFAULT_EVERY_S,
) -> bool:
    """Run ``apply_retention`` every ``every`` seconds on the worker's WAL (``dlq()``; None while it is
    not open) when ``settings.dlq_retention`` holds rules; returns whether a timer was registered."""
    policy = DeadLetterRetention.parse(settings.dlq_retention)
    if not policy.rules:
        return False

    @worker.timer(every, name="converge.dlq.retention")
    async def retention() -> None:
        wal = dlq()
        if wal is None:
            return
        try:
            await asyncio.to_thread(apply_retention, wal, policy)
        except Exception as exc:  # an outage or a store closing under it: the next pass tries again
            log.warning("dead-letter retention pass stopped: %s", exc)

    return True
