"""Helpers of the erasure tests: a WAL with parked events, an export of it, searching rows for a value."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from framework.core.events import Event
from framework.dlq import DeadLetterStore, DeadLetterWAL, ParkedRecord, SegmentFilter, Status
from framework.dlq.export import export_records


def park(root: Path, events: Iterable[Event], *, error: str = "payload.body: rejected") -> int:
    """Park ``events`` in the WAL at ``root`` (as the runtime parks a bad message); closes the writer."""
    wal = DeadLetterWAL(root)
    n = 0
    try:
        for i, e in enumerate(events):
            wal.park_sync(ParkedRecord(
                pipeline="tickets", topic="t", partition=0, offset=i, key=e.ordering_key.encode(),
                value=e.to_json(), stage="map", error_class="PayloadError", error=error,
                parked_at=time.time(), event_type=e.type,
            ))  # fmt: skip
            n += 1
    finally:
        wal.close()
    return n


def export(root: Path, out: Path) -> int:
    """Export every record of the WAL at ``root`` to ``out``; returns how many."""
    store = DeadLetterStore(root)
    try:
        return export_records(store, SegmentFilter(statuses=tuple(Status)), out).records
    finally:
        store.close()


def parked_values(root: Path) -> list[bytes]:
    """The value of every record in the WAL at ``root``, all statuses."""
    store = DeadLetterStore(root)
    try:
        return [e.record.value or b"" for e in store.records(SegmentFilter(statuses=tuple(Status)))]
    finally:
        store.close()
