"""The worker applies ``CONVERGE_DLQ_RETENTION`` (issue 48 item 5): its own root, and the bucket
one worker at a time (the ``leases/retention`` lease), against the embedded S3 server."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.dlq import DeadLetterWAL, SegmentFilter, Status
from framework.dlq.bucket import BucketView
from framework.dlq.leases import Lease, Leases
from framework.dlq.retention import DeadLetterRetention
from framework.settings import Settings
from framework.worker.dlq_retention import RETENTION_LEASE, apply_retention, register_dlq_retention
from stores.objects.store import ObjectStore
from tests.dlq.support import rec

OLD, NEW = 1000.0, time.time()  # parked in 1970, and now
POLICY = DeadLetterRetention.parse("orders=1d")


@pytest.fixture()
def objects(converge_s3: str) -> Iterator[ObjectStore]:
    store = ObjectStore(f"s3://converge-dlq/{uuid.uuid4().hex}", endpoint=converge_s3, access_key="test",
                        secret_key="test")  # fmt: skip
    store.ensure_bucket()
    yield store
    store.close()


def _park(wal: DeadLetterWAL, at: float, pipeline: str = "orders", n: int = 3) -> None:
    for i in range(n):
        wal.park_sync(rec(i, pipeline=pipeline, parked_at=at))


def _bucket(objects: ObjectStore) -> dict[str, int]:
    with BucketView(objects) as view:
        out: dict[str, int] = {}
        for s in view.store.segments(SegmentFilter(statuses=tuple(Status))):
            out[s.partition.pipeline] = out.get(s.partition.pipeline, 0) + s.count
        return out


def test_a_worker_deletes_its_own_segments_past_retention(tmp_path: Path) -> None:
    with DeadLetterWAL(tmp_path) as wal:
        _park(wal, OLD)
        _park(wal, OLD, pipeline="billing")  # no rule: kept forever
        wal.rotate_sync(force=True)
        _park(wal, NEW)  # open: never touched
        done = apply_retention(wal, POLICY)
        assert (done.local.segments, done.local.unreplayed, done.bucket) == (1, 3, None)
        left = {(s.partition.pipeline, s.status) for s in wal.segments(SegmentFilter(statuses=tuple(Status)))}
        assert left == {("billing", Status.SEALED), ("orders", Status.OPEN)}


def test_the_bucket_is_expired_by_one_worker_at_a_time(tmp_path: Path, objects: ObjectStore) -> None:
    for host, at, pipeline in (("a", OLD, "orders"), ("b", NEW, "orders"), ("c", OLD, "billing")):
        with DeadLetterWAL(tmp_path / host, objects=objects) as wal:
            _park(wal, at, pipeline=pipeline)
    assert _bucket(objects) == {"orders": 6, "billing": 3}
    with DeadLetterWAL(tmp_path / "worker", objects=objects) as wal:
        other = Leases(objects, holder="another-worker").acquire(RETENTION_LEASE)
        assert isinstance(other, Lease)
        done = apply_retention(wal, POLICY)
        assert done.busy and done.bucket is None and _bucket(objects) == {"orders": 6, "billing": 3}
        Leases(objects, holder="another-worker").release(other)
        done = apply_retention(wal, POLICY)
        assert done.bucket is not None and (done.bucket.segments, done.bucket.records) == (1, 3)
    assert _bucket(objects) == {"orders": 3, "billing": 3}
    assert not [i.key for i in objects.list("leases/")]  # every lease given back


def test_the_worker_registers_a_retention_timer_only_with_rules(tmp_path: Path) -> None:
    timers: list[tuple[float, Callable[[], Any]]] = []

    class Worker:
        def timer(self, every: float, name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
            def add(fn: Callable[[], Any]) -> Callable[[], Any]:
                timers.append((every, fn))
                return fn

            return add

    with DeadLetterWAL(tmp_path) as wal:
        forever = Settings.resolve("app", env={"CONVERGE_DLQ_ROOT": str(tmp_path)})
        assert not register_dlq_retention(Worker(), lambda: wal, forever) and timers == []
        settings = Settings.resolve("app", env={"CONVERGE_DLQ_ROOT": str(tmp_path),
                                                "CONVERGE_DLQ_RETENTION": "orders=1d"})  # fmt: skip
        assert register_dlq_retention(Worker(), lambda: wal, settings, every=30.0)
        ((every, tick),) = timers
        assert every == 30.0
        _park(wal, OLD)
        wal.rotate_sync(force=True)
        asyncio.run(tick())
        assert wal.segments(SegmentFilter(statuses=tuple(Status))) == []
