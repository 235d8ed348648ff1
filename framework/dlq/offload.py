"""Sealed dead-letter segments moved to object storage: upload, verification, tracking, local removal.

With ``Settings.dlq_objects`` (``s3://BUCKET/PREFIX``) set, the writer's periodic ``rotate``
runs ``offload``: each segment that is no longer open and whose file reads back whole is
uploaded to ``PREFIX/<its path>`` (``segments/<pipeline>/<event_type>/<stage>/<error_class>/
<file>``) with a conditional create, the service's copy is verified (size and digest,
``ObjectStore.verify``), its manifest is created in the tracker (``tracker.py``), and only
then are its local index row and file removed: from then on the bucket is its home, and
``converge dlq`` reaches it through the tracker (``bucket.py``), from any host. A crash
between two steps is repaired by the next pass: the conditional create finds the object and
checks it holds the same bytes; an existing manifest is checked to name the same SHA-256.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from dataclasses import dataclass

from framework.dlq.index import SegmentFilter, SegmentInfo, Status
from framework.dlq.lifecycle import _prune
from framework.dlq.segment import fsync_dir
from framework.dlq.store import DeadLetterStore
from framework.dlq.tracker import Manifest, Tracker
from framework.settings import ENV, Settings
from stores.objects.error_map import DamagedObjectError, ObjectStoreError
from stores.objects.store import ObjectStore, parse_s3_url

__all__ = ["open_objects", "upload_segment", "offload", "offload_quietly", "Offloaded", "origin"]

log = logging.getLogger("framework.dlq")


def open_objects(settings: Settings) -> ObjectStore | None:
    """The object store of ``settings.dlq_objects``; None when segments stay local.

    ValueError names the setting when its URL is malformed; ``MissingExtra`` without boto3.
    """
    if settings.dlq_objects is None:
        return None
    try:
        parse_s3_url(settings.dlq_objects)
    except ValueError as exc:
        raise ValueError(f"dlq_objects ({ENV['dlq_objects']}): {exc}") from None
    return ObjectStore(
        settings.dlq_objects,
        endpoint=settings.dlq_s3_endpoint,
        region=settings.dlq_s3_region,
        access_key=settings.dlq_s3_access_key,
        secret_key=settings.dlq_s3_secret_key,
    )


def origin(store: DeadLetterStore) -> str:
    """Where a segment was parked, as its manifest records it: this host and the WAL root."""
    return f"{socket.gethostname()}:{store.root}"


@dataclass
class Offloaded:
    """What one ``offload`` pass did: segments uploaded and tracked (their local copies removed)."""

    uploaded: int = 0
    ran: bool = True


def upload_segment(store: DeadLetterStore, objects: ObjectStore, seg: SegmentInfo) -> str | None:
    """Upload the file of ``seg`` to the object of the same path, verified; its hex SHA-256.

    None (nothing uploaded) when the file is damaged or missing. An object already there must
    hold the same bytes (``DamagedObjectError`` otherwise): it is the upload of a pass that
    stopped before finishing.
    """
    path = store.abspath(seg)
    health = store.check(seg)
    if health is None or health.damaged or not path.exists():
        return None
    data = path.read_bytes()
    md5, sha256 = hashlib.md5(data, usedforsecurity=False).digest(), hashlib.sha256(data).digest()
    try:
        objects.put(seg.path, data, if_absent=True)
    except FileExistsError:
        objects.verify(seg.path, len(data), md5, sha256)
    return sha256.hex()


def offload(store: DeadLetterStore, objects: ObjectStore) -> Offloaded:
    """One pass: upload and track every segment that is not open, then forget it locally.

    The pass holds ``store.exclusive()``, so no replay, discard, cleanup or erasure changes a
    segment meanwhile; when one of those holds it, the pass does nothing (``ran`` False; the
    next one catches up) rather than make the writer wait. An object-storage error ends the
    pass and is raised; a segment whose file is damaged is left local (``converge dlq verify
    --root`` reports it, ``salvage`` replaces it by a segment that is then uploaded).
    """
    done = Offloaded()
    tracker = Tracker(objects)
    with store.exclusive(wait=False) as held:
        if not held:
            return Offloaded(ran=False)
        for seg in store.segments(SegmentFilter(statuses=(Status.SEALED, Status.REPLAYED, Status.DISCARDED))):
            sha256 = upload_segment(store, objects, seg)
            if sha256 is None:
                continue
            if not tracker.create(Manifest.of(seg, sha256, origin(store))):
                _check_manifest(tracker, seg, sha256)
            _forget(store, seg)
            done.uploaded += 1
            log.info("dead-letter WAL: uploaded %s (%d records) to %s", seg.path, seg.count, objects.url)
        _remove_tracked_leftovers(store, tracker)
    return done


def _remove_tracked_leftovers(store: DeadLetterStore, tracker: Tracker) -> None:
    """Delete unindexed local segment files the tracker has (a pass stopped right after forgetting them)."""
    indexed = store.index.paths()
    for path in sorted(store.segments_root.rglob("*.seg")):
        rel = store.relpath(path)
        if rel not in indexed and tracker.read(rel) is not None:
            path.unlink(missing_ok=True)
            fsync_dir(path.parent)
            _prune(store, path.parent)


def _check_manifest(tracker: Tracker, seg: SegmentInfo, sha256: str) -> None:
    """An existing manifest of ``seg`` (from a pass that stopped) must name the same bytes."""
    got = tracker.read(seg.path)
    if got is not None and got[0].sha256 != sha256:
        raise DamagedObjectError(
            f"{tracker.key(seg.path)} names SHA-256 {got[0].sha256}, the file has {sha256}"
        )


def _forget(store: DeadLetterStore, seg: SegmentInfo) -> None:
    """Remove the local row and file of an uploaded, tracked segment."""
    store.index.delete(seg.id)
    path = store.abspath(seg)
    if path.exists():
        path.unlink()
        fsync_dir(path.parent)
        _prune(store, path.parent)


def offload_quietly(store: DeadLetterStore, objects: ObjectStore) -> Offloaded | None:
    """``offload``, with an object-storage or file error logged instead of raised (the next pass retries)."""
    try:
        return offload(store, objects)
    except (ObjectStoreError, OSError) as exc:
        log.warning("dead-letter WAL: uploading sealed segments to %s stopped: %s", objects.url, exc)
        return None
