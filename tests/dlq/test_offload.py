"""Sealed segments on object storage, against the embedded S3 server: upload, verification,
tracking, local removal, a pass that stopped midway, an outage while uploading, damage."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.bucket import BucketView
from framework.dlq.offload import offload, open_objects, upload_segment
from framework.dlq.tracker import Tracker
from framework.local_s3 import LocalS3
from framework.settings import Settings
from stores.objects.store import ObjectStore
from tests.dlq.support import FakeClock, rec


def _objects(endpoint: str) -> ObjectStore:
    settings = Settings.resolve(
        "app", env={}, dlq_objects=f"s3://converge-dlq/{uuid.uuid4().hex}", dlq_s3_endpoint=endpoint,
        dlq_s3_access_key="test", dlq_s3_secret_key="test",
    )  # fmt: skip
    objects = open_objects(settings)
    assert objects is not None
    objects.ensure_bucket()
    return objects


@pytest.fixture()
def objects(converge_s3: str) -> Iterator[ObjectStore]:
    store = _objects(converge_s3)
    yield store
    store.close()


def test_without_the_setting_segments_stay_local() -> None:
    assert open_objects(Settings.resolve("app", env={})) is None
    with pytest.raises(ValueError, match="CONVERGE_DLQ_OBJECTS"):
        open_objects(Settings.resolve("app", env={"CONVERGE_DLQ_OBJECTS": "/tmp/x"}))


def test_a_sealed_segment_is_uploaded_verified_tracked_and_forgotten_locally(
    tmp_path: Path, objects: ObjectStore
) -> None:
    clock = FakeClock()
    with DeadLetterWAL(tmp_path, clock=clock, objects=objects) as wal:
        for i in range(3):
            wal.park_sync(rec(i))
        (seg,) = wal.segments()
        local = wal.store.abspath(seg)
        data = local.read_bytes()
        assert wal.rotate_sync() == 0 and local.exists()  # open segments are not uploaded
        assert list(objects.list()) == []
        assert wal.rotate_sync(force=True) == 1
        assert not local.exists() and wal.segments() == []  # the bucket is its home now
        assert sorted(o.key for o in objects.list()) == [seg.path, Tracker.key(seg.path)]
        assert seg.path == "segments/orders/order_created/mapper/ValidationError/" + local.name
        assert objects.get(seg.path) == data
        got = Tracker(objects).read(seg.path)
        assert got is not None
        m = got[0]
        assert (m.status, m.count, m.size, m.sha256) == (
            Status.SEALED,
            3,
            len(data),
            hashlib.sha256(data).hexdigest(),
        )
        assert m.partition == seg.partition and (m.first_lsn, m.last_lsn) == (seg.first_lsn, 3)
        assert m.origin.endswith(str(tmp_path.resolve()))
        wal.park_sync(rec(3))  # parking goes on into a new local segment, with the next lsn
        assert [e.lsn for e in wal.iterate()] == [4]
    with BucketView(objects) as view:
        assert [e.record.offset for e in view.store.records()] == [0, 1, 2, 3]
        assert all(not h.damaged for h in view.store.check_all())


def test_a_pass_that_stopped_midway_is_finished_by_the_next(tmp_path: Path, objects: ObjectStore) -> None:
    wal = DeadLetterWAL(tmp_path, objects=objects)
    wal.park_sync(rec(0))
    wal._seal(rec(0).partition_key, 0.0)
    (seg,) = wal.segments()
    upload_segment(wal.store, objects, seg)  # stopped after the upload, before the manifest
    assert Tracker(objects).read(seg.path) is None
    assert offload(wal.store, objects).uploaded == 1
    assert Tracker(objects).read(seg.path) is not None and wal.segments() == []
    wal.park_sync(rec(1))
    wal._seal(rec(1).partition_key, 0.0)
    (seg,) = wal.segments()
    data = wal.store.abspath(seg).read_bytes()
    assert offload(wal.store, objects).uploaded == 1
    wal.store.abspath(seg).parent.mkdir(parents=True, exist_ok=True)
    wal.store.abspath(seg).write_bytes(data)  # stopped after forgetting the row, before the unlink
    offload(wal.store, objects)
    assert not wal.store.abspath(seg).exists()
    wal.close()


def test_an_outage_leaves_the_segment_local_until_a_later_pass(tmp_path: Path) -> None:
    with LocalS3(tmp_path / "s3") as s3:
        objects = _objects(s3.endpoint)
        wal = DeadLetterWAL(tmp_path / "wal", objects=objects)
        wal.park_sync(rec(0))
        s3.stop()
        assert wal.rotate_sync(force=True) == 1  # sealing does not wait for the upload
        (seg,) = wal.segments(SegmentFilter(statuses=(Status.SEALED,)))
        assert wal.store.abspath(seg).exists()
        wal.park_sync(rec(1))  # parking goes on during the outage
        s3.start()  # the server lost its objects: the bucket is new
        objects.ensure_bucket()
        wal.rotate_sync()
        assert wal.store.index.get(seg.id) is None and not wal.store.abspath(seg).exists()
        wal.close()
        with BucketView(objects) as view:
            assert sorted(e.record.offset for e in view.store.records()) == [0, 1]


def test_a_damaged_object_reads_as_a_damaged_segment(tmp_path: Path, objects: ObjectStore) -> None:
    with DeadLetterWAL(tmp_path, objects=objects) as wal:
        wal.park_sync(rec(0))
        (seg,) = wal.segments()
    good = objects.get(seg.path)
    objects._client.put_object(  # the bytes change behind the metadata naming their checksum
        Bucket=objects.bucket, Key=objects.key(seg.path), Body=good[:-10] + b"0123456789",
        Metadata={"converge-sha256": hashlib.sha256(good).hexdigest()},
    )  # fmt: skip
    with BucketView(objects) as view:
        (health,) = view.store.check_all()
        assert health.damaged and "content digest mismatch" in health.describe()  # named, not "missing"


def test_a_damaged_local_segment_stays_local(tmp_path: Path, objects: ObjectStore) -> None:
    wal = DeadLetterWAL(tmp_path, objects=objects)
    wal.park_sync(rec(0))
    wal._seal(rec(0).partition_key, 0.0)
    (seg,) = wal.segments()
    path = wal.store.abspath(seg)
    path.write_bytes(path.read_bytes()[:-5])
    assert offload(wal.store, objects).uploaded == 0
    assert wal.segments() == [seg] and list(objects.list()) == []
    wal.close()


def test_a_pass_skips_while_an_operator_holds_the_root(tmp_path: Path, objects: ObjectStore) -> None:
    wal = DeadLetterWAL(tmp_path, objects=objects)
    wal.park_sync(rec(0))
    other = DeadLetterStore(tmp_path)
    with other.exclusive() as held:
        assert held
        assert wal.rotate_sync(force=True) == 1
        assert list(objects.list()) == []  # the writer did not wait for the lock
        assert not offload(wal.store, objects).ran
    assert offload(wal.store, objects).uploaded == 1
    wal.close()
    other.close()
