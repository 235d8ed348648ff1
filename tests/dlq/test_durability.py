"""The ``uploaded`` durability of the dead-letter WAL, against the embedded S3 server: ``park``
returns once the record's segment is uploaded and verified, parkers share flushes, an outage
makes parking wait without losing anything, ``local`` parking is unchanged; the setting."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.app import App
from framework.dlq import DeadLetterStore, DeadLetterWAL, Status
from framework.dlq.bucket import BucketView
from framework.dlq.segment import SegmentReader
from framework.local_s3 import LocalS3
from framework.settings import Settings
from framework.worker.resources import Resources
from stores.objects.store import ObjectStore
from tests.app.toy import NoteAgent
from tests.dlq.support import rec
from tests.dlq.test_offload import _objects


@pytest.fixture()
def objects(converge_s3: str) -> Iterator[ObjectStore]:
    store = _objects(converge_s3)
    yield store
    store.close()


def _segment_objects(objects: ObjectStore) -> list[str]:
    return sorted(o.key for o in objects.list() if o.key.endswith(".seg"))


def _offsets_in_bucket(objects: ObjectStore, tmp: Path) -> list[int]:
    """The offsets of every record in the bucket's segment objects, each object verified on the way."""
    out: list[int] = []
    for i, key in enumerate(_segment_objects(objects)):
        data = objects.get(key)  # checked against the SHA-256 stored with it
        md5, sha256 = hashlib.md5(data, usedforsecurity=False).digest(), hashlib.sha256(data).digest()
        objects.verify(key, len(data), md5, sha256)  # the service's size and digest
        copy = tmp / f"{i}.seg"
        copy.write_bytes(data)
        reader = SegmentReader(copy)
        out += [r.offset for _, r in reader]
        assert reader.damage == []
    return sorted(out)


def _local_segment_files(root: Path) -> list[Path]:
    return sorted((root / "segments").rglob("*.seg"))


async def test_park_returns_once_the_segment_is_uploaded_and_verified(
    tmp_path: Path, objects: ObjectStore
) -> None:
    with DeadLetterWAL(tmp_path / "wal", objects=objects, durability="uploaded") as wal:
        await wal.park(rec(0))
        assert _local_segment_files(tmp_path / "wal") == []  # removed once the upload verified
        assert len(_segment_objects(objects)) == 1
        assert _offsets_in_bucket(objects, tmp_path) == [0]
        wal.park_sync(rec(1))  # the sync call keeps the local contract: nothing uploaded
        assert len(_local_segment_files(tmp_path / "wal")) == 1 and len(_segment_objects(objects)) == 1
    assert _offsets_in_bucket(objects, tmp_path) == [0, 1]  # close uploads the rest


async def test_concurrent_parkers_share_flushes(tmp_path: Path, objects: ObjectStore) -> None:
    records = [rec(i, error_class=("ValidationError", "MappingError")[i % 2]) for i in range(24)]
    with DeadLetterWAL(tmp_path / "wal", objects=objects, durability="uploaded") as wal:
        await asyncio.gather(*(wal.park(r) for r in records))
        assert wal.group is not None and 1 <= wal.group.flushes < len(records)
        puts = _segment_objects(objects)
        assert 2 <= len(puts) < len(records)  # at least one segment per partition, fewer than records
        assert _local_segment_files(tmp_path / "wal") == []
        assert _offsets_in_bucket(objects, tmp_path) == list(range(24))


async def test_an_outage_makes_parking_wait_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="framework.dlq")
    with LocalS3(tmp_path / "s3") as s3:
        objects = _objects(s3.endpoint)
        wal = DeadLetterWAL(tmp_path / "wal", objects=objects, durability="uploaded")
        s3.stop()
        parks = [asyncio.ensure_future(wal.park(rec(i))) for i in range(3)]
        for _ in range(30):  # a failed pass takes boto3's own retries first
            done, _ = await asyncio.wait(parks, timeout=1.0)
            assert done == set()  # parking waits while the store is down
            if any("parking waits" in r.getMessage() for r in caplog.records):
                break
        else:
            pytest.fail("no warning of a failed upload while the store is down")
        done, _ = await asyncio.wait(parks, timeout=2.0)
        assert done == set()  # still waiting, after several failed passes
        assert len(_local_segment_files(tmp_path / "wal")) >= 1  # the records are on the local disk meanwhile
        s3.start()  # on the same port; the server lost its objects: the bucket is new
        objects.ensure_bucket()
        await asyncio.wait_for(asyncio.gather(*parks), timeout=60.0)
        assert _local_segment_files(tmp_path / "wal") == []
        wal.close()
        assert _offsets_in_bucket(objects, tmp_path) == [0, 1, 2]
        with BucketView(objects) as view:  # every host's view: the local WAL has none of them
            # three parks started together: written in whichever order they ran, none lost
            assert sorted(e.record.offset for e in view.store.records()) == [0, 1, 2]
        objects.close()


async def test_parking_waits_while_another_command_holds_the_root(
    tmp_path: Path, objects: ObjectStore
) -> None:
    with DeadLetterWAL(tmp_path / "wal", objects=objects, durability="uploaded") as wal:
        other = DeadLetterStore(tmp_path / "wal")
        with other.exclusive() as held:
            assert held
            park = asyncio.ensure_future(wal.park(rec(0)))
            done, _ = await asyncio.wait([park], timeout=1.5)
            assert done == set() and _segment_objects(objects) == []
        await asyncio.wait_for(park, timeout=30.0)
        other.close()
        assert _offsets_in_bucket(objects, tmp_path) == [0]


async def test_local_durability_parks_without_uploading(tmp_path: Path, objects: ObjectStore) -> None:
    with DeadLetterWAL(tmp_path / "wal", objects=objects) as wal:
        assert wal.durability == "local" and wal.group is None
        await wal.park(rec(0))
        (seg,) = wal.segments()
        assert seg.status is Status.OPEN and seg.count == 1
        assert wal.store.abspath(seg).exists() and list(objects.list()) == []


def test_the_wal_refuses_uploaded_without_object_storage(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs object storage"):
        DeadLetterWAL(tmp_path, durability="uploaded")
    with pytest.raises(ValueError, match="'local' or 'uploaded'"):
        DeadLetterWAL(tmp_path, durability="remote")  # type: ignore[arg-type]


def test_the_setting() -> None:
    assert Settings.resolve("app", env={}).dlq_durability == "local"
    s3 = {"CONVERGE_DLQ_OBJECTS": "s3://bucket/dlq"}
    uploaded = Settings.resolve("app", env={**s3, "CONVERGE_DLQ_DURABILITY": "uploaded"})
    assert uploaded.dlq_durability == "uploaded"
    assert uploaded.as_env()["CONVERGE_DLQ_DURABILITY"] == "uploaded"
    assert "CONVERGE_DLQ_DURABILITY" not in Settings.resolve("app", env=s3).as_env()
    assert Settings.resolve("app", env=s3, dlq_durability="uploaded").dlq_durability == "uploaded"
    with pytest.raises(
        ValueError, match=r"^dlq_durability \(CONVERGE_DLQ_DURABILITY\): 'local' or 'uploaded'"
    ):
        Settings.resolve("app", env={**s3, "CONVERGE_DLQ_DURABILITY": "remote"})
    with pytest.raises(
        ValueError, match=r"CONVERGE_DLQ_DURABILITY.*'uploaded' needs dlq_objects \(CONVERGE_DLQ_OBJECTS\)"
    ):
        Settings.resolve("app", env={"CONVERGE_DLQ_DURABILITY": "uploaded"})


async def test_a_worker_opens_its_wal_with_the_setting(
    tmp_path: Path, converge_s3: str, objects: ObjectStore
) -> None:
    settings = Settings.resolve(
        "durable", env={}, data_dir=str(tmp_path), dlq_objects=objects.url, dlq_s3_endpoint=converge_s3,
        dlq_s3_access_key="test", dlq_s3_secret_key="test", dlq_durability="uploaded",
    )  # fmt: skip
    resources = Resources(App("durable", agents=[NoteAgent()]), settings)
    await resources.open()
    try:
        assert resources.dlq is not None and resources.dlq.durability == "uploaded"
        await resources.dlq.park(rec(0))
        assert _offsets_in_bucket(objects, tmp_path) == [0]
    finally:
        await resources.close()
