"""Every host's uploaded segments seen from anywhere, against the embedded S3 server: the tracker,
leases (taken, refused, expired and taken over), claims that discard, split, clean up, salvage
and erase, and what they publish."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from framework.dlq import DeadLetterWAL, SegmentFilter, Status
from framework.dlq.bucket import QUARANTINE_PREFIX, BucketView
from framework.dlq.erase import drop_parked
from framework.dlq.leases import Busy, Lease, Leases
from framework.dlq.lifecycle import cleanup, discard, salvage
from framework.dlq.offload import upload_segment
from framework.dlq.tracker import Tracker
from stores.objects.error_map import ChangedObjectError
from stores.objects.store import ObjectStore
from tests.dlq.support import FakeClock, rec


@pytest.fixture()
def objects(converge_s3: str) -> Iterator[ObjectStore]:
    store = ObjectStore(f"s3://converge-dlq/{uuid.uuid4().hex}", endpoint=converge_s3, access_key="test",
                        secret_key="test")  # fmt: skip
    store.ensure_bucket()
    yield store
    store.close()


def _park(
    root: Path, objects: ObjectStore, offsets: range, clock: FakeClock | None = None, **kw: object
) -> None:
    """A worker on another host parks ``offsets`` and stops (sealing and uploading them)."""
    with DeadLetterWAL(root, objects=objects, clock=FakeClock()) as wal:
        for i in offsets:
            wal.park_sync(rec(i, parked_at=float(1000 + i), **kw))  # type: ignore[arg-type]
    assert not list((root / "segments").rglob("*.seg"))


def _offsets(view: BucketView, *statuses: Status) -> list[int]:
    flt = SegmentFilter(statuses=statuses or None)
    return sorted(e.record.offset for e in view.store.records(flt))


def test_the_view_lists_every_hosts_segments_after_their_disks_are_gone(
    tmp_path: Path, objects: ObjectStore
) -> None:
    import shutil

    _park(tmp_path / "host-a", objects, range(0, 3))
    _park(tmp_path / "host-b", objects, range(3, 5), pipeline="billing")
    shutil.rmtree(tmp_path / "host-a")
    shutil.rmtree(tmp_path / "host-b")
    with BucketView(objects) as view:
        assert _offsets(view) == [0, 1, 2, 3, 4]
        assert {s.partition.pipeline for s in view.store.segments()} == {"orders", "billing"}
        assert not any(h.damaged for h in view.store.check_all())
        assert view.orphans() == [] and view.unreadable == {}


def test_a_claimed_discard_is_published_and_cleanup_deletes_objects_and_manifests(
    tmp_path: Path, objects: ObjectStore
) -> None:
    _park(tmp_path / "a", objects, range(0, 2))
    _park(tmp_path / "b", objects, range(2, 4))
    clock = FakeClock()
    with BucketView(objects, clock=clock) as view:
        with view.claim(SegmentFilter(statuses=(Status.SEALED,))) as claim:
            assert claim.busy == []
            assert discard(claim.store, SegmentFilter()).records == 4
        assert claim.published.changed == 2 and claim.published.created == 0
    with BucketView(objects, clock=clock) as view:
        assert _offsets(view, Status.DISCARDED) == [0, 1, 2, 3] and _offsets(view) == []
        clock.tick(3600)
        with view.claim(SegmentFilter(statuses=(Status.DISCARDED,))) as claim:
            assert cleanup(claim.store, grace_s=60).segments == 2
        assert claim.published.removed == 2
    assert list(objects.list()) == []  # objects, manifests and leases all gone


def test_a_window_splits_a_segment_into_two_tracked_objects(tmp_path: Path, objects: ObjectStore) -> None:
    _park(tmp_path / "a", objects, range(0, 4))
    with BucketView(objects) as view:
        (old,) = view.store.segments()
        window = SegmentFilter(since=1001.0, until=1003.0)
        with view.claim(SegmentFilter(statuses=(Status.SEALED,))) as claim:
            assert discard(claim.store, window).records == 2
        assert (claim.published.created, claim.published.removed) == (2, 1)
    with BucketView(objects) as view:
        assert _offsets(view, Status.DISCARDED) == [1, 2] and _offsets(view, Status.SEALED) == [0, 3]
        assert old.path not in view.known and len(view.known) == 2
    assert objects.head(old.path) is None and Tracker(objects).read(old.path) is None


def test_a_segment_another_command_holds_is_left_out(tmp_path: Path, objects: ObjectStore) -> None:
    _park(tmp_path / "a", objects, range(0, 2))
    with BucketView(objects) as first, BucketView(objects) as second:
        with first.claim() as mine:
            assert len(mine.known) == 1
            with second.claim() as theirs:
                assert theirs.known == {} and len(theirs.busy) == 1
                assert discard(theirs.store, SegmentFilter()).records == 0
            assert discard(mine.store, SegmentFilter()).records == 2
    with BucketView(objects) as view:
        assert _offsets(view, Status.DISCARDED) == [0, 1]


def test_an_expired_lease_is_taken_over_and_its_old_holder_cannot_renew_it(objects: ObjectStore) -> None:
    clock = FakeClock()
    a = Leases(objects, holder="host-a", length_s=60, clock=clock)
    b = Leases(objects, holder="host-b", length_s=60, clock=clock)
    held = a.acquire("segments/x.seg")
    assert isinstance(held, Lease)
    refused = b.acquire("segments/x.seg")
    assert isinstance(refused, Busy) and refused.holder == "host-a"
    clock.tick(30)
    held = a.renew(held)  # renewed: valid until 90 s from the start
    clock.tick(45)
    assert isinstance(b.acquire("segments/x.seg"), Busy)
    clock.tick(30)  # host-a died: its lease expired
    taken = b.acquire("segments/x.seg")
    assert isinstance(taken, Lease) and taken.holder == "host-b"
    with pytest.raises(ChangedObjectError):
        a.renew(held)
    a.release(held)  # does not remove host-b's lease
    assert isinstance(a.acquire("segments/x.seg"), Busy)
    b.release(taken)
    assert isinstance(a.acquire("segments/x.seg"), Lease)


def test_a_manifest_changed_under_a_claim_is_not_overwritten(tmp_path: Path, objects: ObjectStore) -> None:
    _park(tmp_path / "a", objects, range(0, 2))
    tracker = Tracker(objects)
    with BucketView(objects) as view:
        with pytest.raises(ChangedObjectError):
            with view.claim() as claim:
                (name,) = claim.known
                m, etag = claim.known[name]
                tracker.update(replace(m, origin="elsewhere"), etag)  # changed behind the lease
                discard(claim.store, SegmentFilter())
    got = tracker.read(name)
    assert got is not None and got[0].status is Status.SEALED


def test_salvage_copies_a_damaged_object_to_quarantine(tmp_path: Path, objects: ObjectStore) -> None:
    _park(tmp_path / "a", objects, range(0, 2))
    with BucketView(objects) as view:
        (seg,) = view.store.segments()
    good = objects.get(seg.path)
    bad = good[:-10] + b"0123456789"
    objects._client.put_object(
        Bucket=objects.bucket, Key=objects.key(seg.path), Body=bad,
        Metadata={"converge-sha256": hashlib.sha256(good).hexdigest()},
    )  # fmt: skip
    with BucketView(objects) as view:
        assert [h.damaged for h in view.store.check_all()] == [True]
        with view.claim() as claim:
            claim.quarantine = True
            assert len(salvage(claim.store, SegmentFilter())) == 1
        assert claim.published.quarantined == 1
    assert (
        objects._client.get_object(Bucket=objects.bucket, Key=objects.key(QUARANTINE_PREFIX + seg.path))[
            "Body"
        ].read()
        == bad
    )
    with BucketView(objects) as view:  # the readable record is kept, only the damaged one is gone
        assert _offsets(view) == [0] and not any(h.damaged for h in view.store.check_all())


def test_an_erasure_reaches_every_hosts_uploaded_segments(tmp_path: Path, objects: ObjectStore) -> None:
    for host, who in (("a", [b"ann", b"bo"]), ("b", [b"ann", b"cy"])):
        with DeadLetterWAL(tmp_path / host, objects=objects) as wal:
            for i, name in enumerate(who):
                wal.park_sync(rec(i, value=b'{"to": "%s"}' % name))
    local = tmp_path / "c"
    with DeadLetterWAL(local) as wal:  # a host without object storage
        wal.park_sync(rec(9, value=b'{"to": "ann"}'))
    matches = lambda r: b"ann" in (r.value or b"")  # noqa: E731
    assert drop_parked(local, objects, matches, dry_run=True).records == 3
    dropped = drop_parked(local, objects, matches)
    assert dropped.records == 3 and dropped.held_open == 0
    for info in objects.list("segments/"):
        assert b"ann" not in objects.get(info.key)
    with BucketView(objects) as view:
        assert sorted(e.record.value for e in view.store.records()) == [b'{"to": "bo"}', b'{"to": "cy"}']


def test_an_unreadable_manifest_and_an_orphan_are_reported(tmp_path: Path, objects: ObjectStore) -> None:
    _park(tmp_path / "a", objects, range(0, 1))
    objects.put("tracker/segments/x/y/z/w/0-1.seg.json", b"{not json")
    objects.put("segments/x/y/z/w/9-9.seg", b"bytes without a manifest")
    with BucketView(objects) as view:
        assert list(view.unreadable) == ["segments/x/y/z/w/0-1.seg"]
        assert view.orphans() == ["segments/x/y/z/w/9-9.seg"]
        assert _offsets(view) == [0]


def test_salvage_adopts_an_orphan_segment_object(tmp_path: Path, objects: ObjectStore) -> None:
    wal = DeadLetterWAL(tmp_path / "a", objects=objects)
    for i in range(3):
        wal.park_sync(rec(i, parked_at=1000.0 + i))
    wal._seal(rec(0).partition_key, 0.0)
    (seg,) = wal.segments()
    assert upload_segment(wal.store, objects, seg) is not None  # the host died before the manifest
    objects.put("segments/x/y/z/w/9-9.seg", b"not a segment")
    with BucketView(objects) as view:
        assert view.store.segments() == []
        assert sorted(view.orphans()) == [seg.path, "segments/x/y/z/w/9-9.seg"]
        assert view.adopt(view.orphans()) == [seg.path]
    with BucketView(objects) as view:
        (got,) = view.store.segments()
        assert (got.path, got.partition, got.count, got.first_lsn, got.last_lsn) == (
            seg.path, seg.partition, 3, 1, 3,
        )  # fmt: skip
        assert _offsets(view) == [0, 1, 2] and not view.store.check_all()[0].damaged
        assert view.orphans() == ["segments/x/y/z/w/9-9.seg"]  # never deleted by converge
    wal.close()
