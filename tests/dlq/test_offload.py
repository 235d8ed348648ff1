"""Sealed segments on object storage, against the embedded S3 server: upload, verification,
local removal, reading back, stale objects deleted, an outage while uploading."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.erase import drop_records
from framework.dlq.lifecycle import cleanup, discard
from framework.dlq.offload import delete_stale, object_name, offload, open_objects
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


def test_a_sealed_segment_is_uploaded_verified_and_its_local_copy_removed(
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
        assert not local.exists()
        (stored,) = objects.list()
        assert stored.key == object_name(seg) == "orders/order_created/mapper/ValidationError/" + local.name
        assert objects.get(stored.key) == data
        up = wal.store.index.upload(seg.id)
        assert up is not None and (up.bytes, up.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        wal.park_sync(rec(3))  # parking goes on into a new local segment
    store = DeadLetterStore(tmp_path, objects=objects)
    assert [e.record.offset for e in store.records()] == [0, 1, 2, 3]
    assert local.read_bytes() == data  # fetched back for the reader
    assert all(not h.damaged for h in store.check_all())
    assert offload(store, objects).removed == 2 and not local.exists()  # the next pass removes both again


def test_a_store_without_object_storage_sees_the_uploaded_segment_missing(
    tmp_path: Path, objects: ObjectStore
) -> None:
    with DeadLetterWAL(tmp_path, objects=objects) as wal:
        wal.park_sync(rec(0))
    (health,) = DeadLetterStore(tmp_path).check_all()
    assert health.damaged and "missing" in health.describe()


def test_cleaned_up_segments_lose_their_objects(tmp_path: Path, objects: ObjectStore) -> None:
    clock = FakeClock()
    with DeadLetterWAL(tmp_path, clock=clock, objects=objects) as wal:
        wal.park_sync(rec(0))
    store = DeadLetterStore(tmp_path, clock=clock, objects=objects)
    assert discard(store, SegmentFilter()).records == 1
    clock.tick(10)
    assert cleanup(store, grace_s=0).segments == 1
    assert len(list(objects.list())) == 1
    assert offload(store, objects).deleted == 1
    assert list(objects.list()) == [] and store.index.stale_uploads() == []


def test_an_outage_leaves_the_segment_local_until_a_later_pass(tmp_path: Path) -> None:
    with LocalS3(tmp_path / "s3") as s3:
        objects = _objects(s3.endpoint)
        wal = DeadLetterWAL(tmp_path / "wal", objects=objects)
        wal.park_sync(rec(0))
        s3.stop()
        assert wal.rotate_sync(force=True) == 1  # sealing does not wait for the upload
        (seg,) = wal.segments(SegmentFilter(statuses=(Status.SEALED,)))
        assert wal.store.abspath(seg).exists() and wal.store.index.upload(seg.id) is None
        wal.park_sync(rec(1))  # parking goes on during the outage
        s3.start()  # the server lost its objects: the bucket is new
        objects.ensure_bucket()
        wal.rotate_sync()
        assert wal.store.index.upload(seg.id) is not None and not wal.store.abspath(seg).exists()
        wal.close()
        store = DeadLetterStore(tmp_path / "wal", objects=objects)
        assert [e.record.offset for e in store.records()] == [0, 1]


def test_an_erasure_rewrites_uploaded_segments_and_deletes_the_old_objects(
    tmp_path: Path, objects: ObjectStore
) -> None:
    with DeadLetterWAL(tmp_path, objects=objects) as wal:
        for i, who in enumerate([b"ann", b"bo", b"ann"]):
            wal.park_sync(rec(i, value=b'{"to": "%s"}' % who))
    (old,) = list(objects.list())
    store = DeadLetterStore(tmp_path, objects=objects)
    dropped = drop_records(store, lambda r: b"ann" in (r.value or b""))
    assert dropped.records == 2
    assert delete_stale(store, objects) == 1  # as ``framework.erasure.run`` does after dropping
    assert [o.key for o in objects.list()] == []  # the rewritten segment is local until the writer's pass
    assert offload(store, objects).uploaded == 1
    (new,) = list(objects.list())
    assert new.key != old.key and b"ann" not in objects.get(new.key)
    assert [e.record.offset for e in store.records()] == [1]


def test_a_damaged_object_reads_as_a_damaged_segment(tmp_path: Path, objects: ObjectStore) -> None:
    with DeadLetterWAL(tmp_path, objects=objects) as wal:
        wal.park_sync(rec(0))
    (stored,) = objects.list()
    good = objects.get(stored.key)
    objects._client.put_object(  # the bytes change behind the metadata naming their checksum
        Bucket=objects.bucket, Key=objects.key(stored.key), Body=good[:-10] + b"0123456789",
        Metadata={"converge-sha256": hashlib.sha256(good).hexdigest()},
    )  # fmt: skip
    (health,) = DeadLetterStore(tmp_path, objects=objects).check_all()
    assert health.damaged and "missing" in health.describe()


def test_a_pass_skips_while_an_operator_holds_the_root(tmp_path: Path, objects: ObjectStore) -> None:
    wal = DeadLetterWAL(tmp_path, objects=objects)
    wal.park_sync(rec(0))
    other = DeadLetterStore(tmp_path)
    with other.exclusive() as held:
        assert held
        assert wal.rotate_sync(force=True) == 1
        assert list(objects.list()) == []  # the writer did not wait for the lock
    assert offload(wal.store, objects).uploaded == 1
    wal.close()
    other.close()
