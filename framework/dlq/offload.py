"""Sealed dead-letter segments moved to object storage: upload, verification, local removal.

With ``Settings.dlq_objects`` (``s3://BUCKET/PREFIX``) set, the writer's periodic ``rotate``
runs ``offload``: each sealed segment whose file reads back whole is uploaded to
``PREFIX/<pipeline>/<event_type>/<stage>/<error_class>/<segment file>`` (its path under
``segments/``) with a conditional create, the service's copy is verified (size and digest,
``ObjectStore.verify``), the upload is recorded in the index, and only then is the local file
deleted. A segment is immutable once sealed (a rewrite makes a new segment with a new id), so
the upload is its copy for good. ``DeadLetterStore`` fetches it back when a reader needs it;
the next pass removes that local copy again. Objects whose segment left the index (cleaned
up, split, rewritten by an erasure) are deleted by the same pass.

Parking does not wait for any of this: a record is acknowledged once fsynced locally.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from framework.dlq.index import SegmentFilter, SegmentInfo, Status, Upload
from framework.dlq.lifecycle import _prune
from framework.dlq.segment import fsync_dir
from framework.dlq.store import DeadLetterStore
from framework.settings import ENV, Settings
from stores.objects.error_map import ObjectStoreError
from stores.objects.store import ObjectStore, parse_s3_url

__all__ = ["open_objects", "object_name", "offload", "offload_quietly", "delete_stale", "Offloaded"]

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


def object_name(seg: SegmentInfo) -> str:
    """The object name of a segment: its path under ``segments/``."""
    return seg.path.removeprefix("segments/")


@dataclass
class Offloaded:
    """What one ``offload`` pass did: segments uploaded, local copies removed, stale objects deleted."""

    uploaded: int = 0
    removed: int = 0
    deleted: int = 0


def offload(store: DeadLetterStore, objects: ObjectStore) -> Offloaded:
    """One pass: upload sealed segments, remove local copies of uploaded ones, delete stale objects.

    The pass holds ``store.exclusive()``, so no replay, discard, cleanup or erasure changes a
    segment meanwhile; when one of those holds it, the pass does nothing (the next one
    catches up) rather than make the writer wait. An object-storage error ends the pass and
    is raised; a segment whose file is damaged is left local (``converge dlq verify`` reports
    it, ``salvage`` replaces it by a segment that is then uploaded).
    """
    done = Offloaded()
    with store.exclusive(wait=False) as held:
        if not held:
            return done
        for seg in store.segments(SegmentFilter(statuses=(Status.SEALED, Status.REPLAYED, Status.DISCARDED))):
            up = store.index.upload(seg.id)
            if up is None and seg.status is Status.SEALED:
                up = _upload(store, objects, seg)
                done.uploaded += up is not None
            if up is not None and _remove_local(store, seg):
                done.removed += 1
        done.deleted = delete_stale(store, objects)
    return done


def delete_stale(store: DeadLetterStore, objects: ObjectStore) -> int:
    """Delete the objects whose segment left the index (cleaned up, split, rewritten); returns how many."""
    stale = store.index.stale_uploads()
    for up in stale:
        objects.delete(up.name)
        store.index.forget_upload(up.segment_id)
    return len(stale)


def _upload(store: DeadLetterStore, objects: ObjectStore, seg: SegmentInfo) -> Upload | None:
    path = store.abspath(seg)
    health = store.check(seg)
    if health is None or health.damaged or not path.exists():
        return None
    data = path.read_bytes()
    md5, sha256 = hashlib.md5(data, usedforsecurity=False).digest(), hashlib.sha256(data).digest()
    name = object_name(seg)
    try:
        objects.put(name, data, if_absent=True)
    except FileExistsError:  # a pass that crashed before recording it: the same bytes must be there
        objects.verify(name, len(data), md5, sha256)
    up = Upload(seg.id, name, len(data), sha256.hex(), store.clock())
    store.index.record_upload(up)
    log.info("dead-letter WAL: uploaded %s (%d bytes) to %s", seg.path, len(data), objects.url)
    return up


def _remove_local(store: DeadLetterStore, seg: SegmentInfo) -> bool:
    path = store.abspath(seg)
    if not path.exists():
        return False
    path.unlink()
    fsync_dir(path.parent)
    _prune(store, path.parent)
    return True


def offload_quietly(store: DeadLetterStore, objects: ObjectStore) -> Offloaded | None:
    """``offload``, with an object-storage or file error logged instead of raised (the next pass retries)."""
    try:
        return offload(store, objects)
    except (ObjectStoreError, OSError) as exc:
        log.warning("dead-letter WAL: uploading sealed segments to %s stopped: %s", objects.url, exc)
        return None
