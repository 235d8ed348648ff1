"""The tracker: one manifest object per uploaded segment, the view every host shares.

A segment uploaded to ``segments/<pipeline>/<event type>/<stage>/<error class>/<file>``
has its manifest at ``tracker/<that name>.json``: the partition, the counters (records,
bytes, first/last parked time and lsn), the SHA-256 of the bytes, the status and where it was
parked. The manifest is created only if absent (``If-None-Match: *``) and every later change
(status, removal) is conditional on the ETag read (``If-Match``), so of two hosts changing
the same segment one wins and the other gets ``ChangedObjectError``. Listing ``tracker/``
lists every host's parked events; a segment object without a manifest is an orphan (a
writer stopped between the two puts).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from framework.dlq.index import NewSegment, SegmentInfo, Status
from framework.dlq.record import Partition
from stores.objects.error_map import DamagedObjectError
from stores.objects.store import ObjectStore

__all__ = ["Manifest", "Tracker", "TRACKER", "SEGMENTS", "moved"]

log = logging.getLogger("framework.dlq")

TRACKER = "tracker/"
SEGMENTS = "segments/"
_SUFFIX = ".json"
_VERSION = 1


@dataclass(frozen=True)
class Manifest:
    """What the tracker knows of one uploaded segment; ``name`` is its object name (``segments/...``)."""

    name: str
    partition: Partition
    status: Status
    count: int
    size: int
    first_ts: float | None
    last_ts: float | None
    first_lsn: int | None
    last_lsn: int | None
    created_at: float
    status_at: float
    sha256: str
    origin: str

    @classmethod
    def of(cls, seg: SegmentInfo, sha256: str, origin: str) -> Manifest:
        """The manifest of the indexed segment ``seg`` (its object name is its path)."""
        return cls(seg.path, seg.partition, seg.status, seg.count, seg.bytes, seg.first_ts, seg.last_ts,
                   seg.first_lsn, seg.last_lsn, seg.created_at, seg.status_at, sha256, origin)  # fmt: skip

    def row(self) -> NewSegment:
        """The index row of this segment in a scratch WAL root (its path is its object name)."""
        return NewSegment(self.partition, self.name, self.status, self.count, self.size, self.first_ts,
                          self.last_ts, self.first_lsn, self.last_lsn, self.created_at)  # fmt: skip

    def encode(self) -> bytes:
        """The manifest's JSON bytes."""
        body = asdict(self) | {
            "version": _VERSION,
            "partition": list(self.partition),
            "status": self.status.value,
        }
        return json.dumps(body, ensure_ascii=True, sort_keys=True, allow_nan=False).encode()

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        """The manifest in ``data``; ValueError when it is not one."""
        try:
            obj: Any = json.loads(data)
            if not isinstance(obj, dict) or obj.pop("version", None) != _VERSION:
                raise ValueError("not a version-1 manifest")
            part = obj.pop("partition")
            if not (isinstance(part, list) and len(part) == 4 and all(isinstance(p, str) for p in part)):
                raise ValueError("bad partition")
            m = cls(partition=Partition(*part), status=Status(obj.pop("status")), **obj)
        except (TypeError, KeyError, RecursionError) as exc:
            raise ValueError(f"not a manifest: {exc!r}") from None
        if not (isinstance(m.name, str) and m.name.startswith(SEGMENTS) and isinstance(m.count, int)
                and isinstance(m.size, int) and isinstance(m.sha256, str)):  # fmt: skip
            raise ValueError("not a manifest: bad name or counters")
        return m


class Tracker:
    """The manifests under ``tracker/`` of an object store."""

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    @staticmethod
    def key(name: str) -> str:
        """The manifest object of the segment object ``name``."""
        return f"{TRACKER}{name}{_SUFFIX}"

    def create(self, m: Manifest) -> bool:
        """Store ``m`` if the segment has no manifest yet; False when it has one."""
        return self.objects.create(self.key(m.name), m.encode())

    def read(self, name: str) -> tuple[Manifest, str] | None:
        """The manifest of segment ``name`` with its ETag; None when there is none.

        ValueError or ``DamagedObjectError`` when the object is not a readable manifest.
        """
        try:
            data, etag = self.objects.read(self.key(name))
        except FileNotFoundError:
            return None
        return Manifest.decode(data), etag

    def names(self) -> list[str]:
        """The segment names of every manifest, in key order."""
        return [
            i.key[len(TRACKER) : -len(_SUFFIX)] for i in self.objects.list(TRACKER) if i.key.endswith(_SUFFIX)
        ]

    def read_all(self, names: Iterable[str]) -> tuple[list[tuple[Manifest, str]], dict[str, str]]:
        """The manifests of ``names`` (those still there) with their ETags, and the unreadable ones with why.

        Reads run a few at a time (boto3's client is thread-safe).
        """
        good: list[tuple[Manifest, str]] = []
        bad: dict[str, str] = {}

        def one(name: str) -> tuple[str, tuple[Manifest, str] | None | str]:
            try:
                return name, self.read(name)
            except (ValueError, DamagedObjectError) as exc:
                return name, str(exc)

        with ThreadPoolExecutor(max_workers=8) as pool:
            for name, got in pool.map(one, list(names)):
                if isinstance(got, str):
                    log.error("dead-letter tracker: %s is unreadable: %s", self.key(name), got)
                    bad[name] = got
                elif got is not None:
                    good.append(got)
        return good, bad

    def update(self, m: Manifest, etag: str) -> str:
        """Replace the manifest read with ``etag`` by ``m``; returns the new ETag.

        ``ChangedObjectError`` when another host changed or removed it meanwhile.
        """
        return self.objects.put(self.key(m.name), m.encode(), if_match=etag).etag

    def remove(self, name: str, etag: str) -> None:
        """Delete the manifest read with ``etag``; ``ChangedObjectError`` when it changed meanwhile."""
        self.objects.delete(self.key(name), if_match=etag)

    def orphans(self) -> list[str]:
        """Segment objects without a manifest (a writer stopped between uploading and tracking it)."""
        tracked = set(self.names())
        return [i.key for i in self.objects.list(SEGMENTS) if i.key not in tracked]


def moved(m: Manifest, seg: SegmentInfo) -> Manifest:
    """``m`` with the status and counters ``seg`` has now."""
    return replace(m, status=seg.status, status_at=seg.status_at, count=seg.count, size=seg.bytes,
                   first_ts=seg.first_ts, last_ts=seg.last_ts, first_lsn=seg.first_lsn,
                   last_lsn=seg.last_lsn)  # fmt: skip
