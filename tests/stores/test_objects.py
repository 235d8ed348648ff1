"""The object-storage adapter against the embedded S3 server (moto's server mode, a real HTTP endpoint)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.core.errors import Transient
from framework.local_s3 import LocalS3
from stores.objects.error_map import DamagedObjectError, PermanentObjectError, TransientObjectError
from stores.objects.store import ObjectStore, parse_s3_url


def _store(endpoint: str, prefix: str = "") -> ObjectStore:
    url = f"s3://converge-test/{prefix or uuid.uuid4().hex}"
    store = ObjectStore(url, endpoint=endpoint, access_key="test", secret_key="test", attempts=1)
    store.ensure_bucket()
    return store


@pytest.fixture()
def objects(converge_s3: str) -> Iterator[ObjectStore]:
    store = _store(converge_s3)
    yield store
    store.close()


def test_urls_name_a_bucket_and_a_prefix() -> None:
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    for bad in ("bucket/a", "file:///x", "s3:///a"):
        with pytest.raises(ValueError, match="s3://BUCKET/PREFIX"):
            parse_s3_url(bad)


def test_put_is_verified_and_get_returns_the_bytes(objects: ObjectStore) -> None:
    info = objects.put("p/e/one.seg", b"parked\n")
    assert info.size == 7 and info.sha256 == hashlib.sha256(b"parked\n").hexdigest()
    assert objects.get("p/e/one.seg") == b"parked\n"
    assert objects.head("p/e/none.seg") is None
    with pytest.raises(FileNotFoundError):
        objects.get("p/e/none.seg")


def test_list_by_prefix_and_delete(objects: ObjectStore) -> None:
    for name in ("a/1.seg", "a/2.seg", "b/1.seg"):
        objects.put(name, name.encode())
    assert [o.key for o in objects.list("a/")] == ["a/1.seg", "a/2.seg"]
    assert [o.key for o in objects.list()] == ["a/1.seg", "a/2.seg", "b/1.seg"]
    objects.delete("a/1.seg")
    objects.delete("a/1.seg")  # deleting what is gone is no error
    assert [o.key for o in objects.list()] == ["a/2.seg", "b/1.seg"]


def test_create_writes_only_a_new_key(objects: ObjectStore) -> None:
    assert objects.create("lease", b"host-1")
    assert not objects.create("lease", b"host-2")
    assert objects.get("lease") == b"host-1"


def test_a_damaged_upload_is_detected(objects: ObjectStore) -> None:
    meant = b"the segment as written"
    arrived = b"the segment as damaged"  # same size, other bytes: what a faulty transport delivers
    with pytest.raises(DamagedObjectError, match="not the 22 bytes"):
        objects._put(
            "damaged.seg", arrived, hashlib.md5(meant).digest(), hashlib.sha256(meant).digest(), False
        )


def test_a_damaged_object_is_detected_when_read(objects: ObjectStore) -> None:
    objects.put("x.seg", b"good bytes")
    # another writer replaces the body but keeps the metadata naming the old checksum
    objects._client.put_object(
        Bucket=objects.bucket, Key=objects.key("x.seg"), Body=b"bad bytes!",
        Metadata={"converge-sha256": hashlib.sha256(b"good bytes").hexdigest()},
    )  # fmt: skip
    with pytest.raises(DamagedObjectError, match="content digest mismatch"):
        objects.get("x.seg")


def test_a_missing_bucket_is_permanent(converge_s3: str) -> None:
    store = ObjectStore("s3://no-such-bucket-here/x", endpoint=converge_s3, access_key="t", secret_key="t")
    with pytest.raises(PermanentObjectError):
        store.put("a", b"1")


def test_an_outage_is_transient(tmp_path: Path) -> None:
    with LocalS3(tmp_path) as s3:
        store = _store(s3.endpoint, "outage")
        store.put("before", b"1")
        s3.stop()
        with pytest.raises(TransientObjectError) as caught:
            store.put("during", b"2")
        assert isinstance(caught.value, Transient)
        with pytest.raises(TransientObjectError):
            store.get("before")
