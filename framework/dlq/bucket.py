"""Every host's parked events, seen from anywhere: the tracker mirrored into a scratch WAL root.

``BucketView`` reads the tracker's manifests (``tracker.py``) into the index of a scratch
root, one row per uploaded segment whose path is its object name; a segment's bytes are
fetched from the bucket when first read (``DeadLetterStore.local``) and checked against their
SHA-256. Every reading command (list, show, verify, export) then works on ``view.store`` as on
a local root.

A command that changes segments (replay, discard, cleanup, salvage, an erasure) works inside
``view.claim(filter)``: it takes the lease (``leases.py``) of every selected segment, reads
their manifests again, mirrors only those into a root of their own, and lets the command run
there. When the block ends without an error the changes are published: segments the command
wrote (the two halves of a split, a rewrite, a salvaged copy) are uploaded and tracked first,
then changed statuses are written with ``If-Match`` on the manifest read, then the manifests
and objects of segments the command removed are deleted (a salvaged original is copied to
``quarantine/`` first). Then the leases are released. A step that fails leaves the tracker
with every record in at least one live segment: a replay stopped between sending and
publishing is sent again by the next one (at least once, as on a local root).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from framework.dlq.index import SegmentFilter, SegmentInfo, Status, Upload
from framework.dlq.leases import DEFAULT_LEASE_S, Busy, Leases
from framework.dlq.lifecycle import LOST_SUFFIX
from framework.dlq.offload import origin, upload_segment
from framework.dlq.record import Partition
from framework.dlq.segment import Damage, SegmentReader
from framework.dlq.store import DeadLetterStore
from framework.dlq.tracker import Manifest, Tracker, moved
from stores.objects.error_map import ChangedObjectError, DamagedObjectError
from stores.objects.store import ObjectStore

__all__ = [
    "BucketView",
    "Claim",
    "Published",
    "Repaired",
    "Untracked",
    "QUARANTINE_PREFIX",
    "LOST_SUFFIX",
    "busy_lines",
]

log = logging.getLogger("framework.dlq")

QUARANTINE_PREFIX = "quarantine/"
_ALL = SegmentFilter(statuses=tuple(Status))


@dataclass
class Published:
    """What a claim wrote back: segments uploaded and tracked, manifests changed, segments removed."""

    created: int = 0
    changed: int = 0
    removed: int = 0
    quarantined: int = 0
    #: Segments removed whose object was missing: their records lost, by object name, with the
    #: record of the loss written under ``quarantine/`` (``<name>.lost.json``).
    lost: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Repaired:
    """An untracked segment made whole: tracked again (or its manifest cleared); the old manifest's copy."""

    untracked: Untracked
    quarantined: str


@dataclass
class Claim:
    """The leased segments of one command, mirrored in ``store``; ``busy`` are those others hold.

    A salvage sets ``quarantine``: the objects of the segments it replaced are copied to
    ``quarantine/`` before they are deleted.
    """

    store: DeadLetterStore
    busy: list[Busy]
    known: dict[str, tuple[Manifest, str]]
    quarantine: bool = False
    published: Published = field(default_factory=Published)


def _mirror(
    store: DeadLetterStore, entries: Iterable[tuple[Manifest, str]]
) -> dict[str, tuple[Manifest, str]]:
    """Index ``entries`` in the scratch root ``store``; returns them by object name."""
    known: dict[str, tuple[Manifest, str]] = {}
    for m, etag in entries:
        seg_id = store.index.insert(m.row(), m.status_at)
        store.index.record_upload(Upload(seg_id, m.name, m.size, m.sha256, m.created_at))
        known[m.name] = (m, etag)
    return known


@dataclass(frozen=True)
class Untracked:
    """A segment object whose manifest cannot be read: why, and what was found from the object itself.

    ``manifest`` is the one derived from the object (status sealed: the status the manifest held is
    lost); None when the object is missing or holds no readable segment header (``problem`` says).
    """

    name: str
    why: str
    etag: str
    manifest: Manifest | None = None
    problem: str | None = None


def _derive(objects: ObjectStore, name: str, scratch: Path, origin: str, now: float) -> Manifest | str:
    """The manifest of the segment object ``name`` from its own header and records (as sealed), its
    bytes left at ``scratch``; or why there is none (the object is missing or no segment)."""
    try:
        got = objects.fetch(name)
    except FileNotFoundError:
        return "its segment object is missing"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    scratch.write_bytes(got.data)
    r = SegmentReader(scratch, quiet=True).scan()
    if r.header is None:
        scratch.unlink()
        return "its segment object has no readable segment header"
    try:
        part = Partition(*(str(r.header[k]) for k in Partition._fields))
    except KeyError:
        scratch.unlink()
        return "its segment object's header names no partition"
    created = r.header.get("created_at")
    return Manifest(name, part, Status.SEALED, r.count, len(got.data), r.first_ts, r.last_ts, r.first_lsn,
                    r.last_lsn, float(created) if isinstance(created, int | float) else now, now,
                    got.actual_sha256, origin)  # fmt: skip


def _untracked(
    store: DeadLetterStore, tracker: Tracker, bad: dict[str, str], origin: str
) -> dict[str, Untracked]:
    """Index in ``store`` the segments of the unreadable manifests ``bad`` (name -> why), found from
    their objects and noted as damaged; returns every one, mirrored or not."""
    found: dict[str, Untracked] = {}
    for name, why in sorted(bad.items()):
        try:
            raw = tracker.objects.fetch(tracker.key(name))
        except FileNotFoundError:  # removed meanwhile
            continue
        derived = _derive(tracker.objects, name, store.abspath(name), origin, store.clock())
        if isinstance(derived, str):
            found[name] = Untracked(name, why, raw.etag, None, derived)
            continue
        found[name] = Untracked(name, why, raw.etag, derived)
        _mirror(store, [(derived, raw.etag)])
        found_by = "the segment was found from its object; converge dlq salvage adopts it"
        store.notes[name] = [Damage(0, 0, f"unreadable manifest {tracker.key(name)} ({why}): {found_by}")]
    return found


class BucketView:
    """The uploaded segments of every host, mirrored in a scratch root (removed by ``close``).

    A segment whose manifest cannot be read is found from its object (``untracked``): listed,
    shown and exported with its records, reported as damaged (so never replayed, discarded or
    deleted), and adopted by ``adopt``.
    """

    def __init__(
        self,
        objects: ObjectStore,
        *,
        clock: Callable[[], float] = time.time,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        self.objects = objects
        self.tracker = Tracker(objects)
        self.leases = Leases(objects, length_s=lease_s, clock=clock)
        self.clock = clock
        self._tmp = tempfile.TemporaryDirectory(prefix="converge-dlq-bucket-")
        self.root = Path(self._tmp.name)
        self._claims = 0
        self.store = DeadLetterStore(self.root / "view", clock=clock, quiet=True, objects=objects)
        entries, self.unreadable = self.tracker.read_all(self.tracker.names())
        self.known = _mirror(self.store, entries)
        self.untracked = _untracked(self.store, self.tracker, self.unreadable, self._origin())

    def _origin(self) -> str:
        return f"adopted by {self.leases.holder}"

    @property
    def url(self) -> str:
        """The bucket and prefix viewed."""
        return self.objects.url

    def orphans(self) -> list[str]:
        """Segment objects without a manifest (listed by ``verify``; never deleted by converge)."""
        return self.tracker.orphans()

    def adopt(self, names: Iterable[str]) -> list[str]:
        """Track the orphan segment objects ``names`` as sealed, from their own header and records.

        An orphan is a writer's upload whose manifest was never created (it stopped between the
        two puts, and may be gone). One whose header cannot be read, or that a writer tracked
        meanwhile, is left as it is. Returns the names adopted.
        """
        adopted = []
        for name in names:
            m = _derive(self.objects, name, self.root / "adopt" / name, self._origin(), self.clock())
            if isinstance(m, str):
                log.error("dead-letter segment object %s not adopted: %s", name, m.removeprefix("its "))
                continue
            if self.tracker.create(m):
                adopted.append(name)
        return adopted

    def repair_untracked(self) -> list[Repaired]:
        """Give every ``untracked`` segment a manifest again, or clear a manifest whose object is gone.

        The unreadable manifest is copied to ``quarantine/tracker/`` first, then replaced (``If-Match``
        on the ETag read) by the manifest derived from the segment object, as sealed (the status it
        held is lost: a replay sends its records again, at least once). A manifest whose segment
        object is missing is removed, its loss recorded in ``quarantine/<name>.lost.json`` (how many
        records is unknown: the manifest that counted them is unreadable). An object that holds no
        segment is left as it is. A manifest changed meanwhile is left to its new writer.
        """
        done: list[Repaired] = []
        for u in self.untracked.values():
            if u.manifest is None and u.problem != "its segment object is missing":
                log.error("dead-letter manifest of %s not repaired: %s", u.name, u.problem)
                continue
            key = self.tracker.key(u.name)
            kept = QUARANTINE_PREFIX + key
            try:
                self.objects.copy(key, kept)
                if u.manifest is not None:
                    self.objects.put(key, u.manifest.encode(), if_match=u.etag)
                else:
                    self._record_loss(u.name, None, f"unreadable manifest ({u.why}) and no segment object")
                    self.tracker.remove(u.name, u.etag)
            except (FileNotFoundError, ChangedObjectError) as exc:
                log.error("dead-letter manifest of %s not repaired: it changed meanwhile (%s)", u.name, exc)
                continue
            done.append(Repaired(u, kept))
        return done

    def _record_loss(self, name: str, m: Manifest | None, why: str) -> str:
        """Write ``quarantine/<name>.lost.json``: what was lost of segment ``name`` and why; its key."""
        key = f"{QUARANTINE_PREFIX}{name}{LOST_SUFFIX}"
        body = {"segment": name, "why": why, "records_lost": None if m is None else m.count,
                "manifest": None if m is None else json.loads(m.encode()), "at": self.clock(),
                "by": self.leases.holder}  # fmt: skip
        self.objects.put(key, json.dumps(body, sort_keys=True).encode())
        log.error("dead-letter segment %s cleared: %s; %s records lost (recorded in %s)", name, why,
                  "an unknown number of" if m is None else m.count, key)  # fmt: skip
        return key

    @contextmanager
    def claim(self, flt: SegmentFilter | None = None, names: Iterable[str] | None = None) -> Iterator[Claim]:
        """Lease the segments ``flt`` (or ``names``) selects, mirror them for a change, publish on success."""
        chosen = [s.path for s in self.store.segments(flt or _ALL)] if names is None else list(names)
        self._claims += 1
        store = DeadLetterStore(self.root / f"claim-{self._claims}", clock=self.clock, quiet=True,
                                objects=self.objects)  # fmt: skip
        try:
            with self.leases.hold(chosen) as held:
                entries, bad = self.tracker.read_all(held.leases)  # as they are now that they are ours
                self.unreadable.update(bad)
                claim = Claim(store, list(held.busy), _mirror(store, entries))
                for name, u in _untracked(store, self.tracker, bad, self._origin()).items():
                    if u.manifest is not None:  # damaged: reported, never changed by a command
                        claim.known[name] = (u.manifest, u.etag)
                yield claim
                if held.lost:
                    raise RuntimeError(f"leases lost while working on {sorted(held.lost)}: nothing published")
                claim.published = self._publish(claim)
        finally:
            store.close()

    def _publish(self, claim: Claim) -> Published:
        store, known, out = claim.store, claim.known, Published()
        now = {s.path: s for s in store.segments(_ALL)}
        for path, seg in now.items():
            if path not in known:
                self._create(store, seg)
                out.created += 1
        for path, seg in now.items():
            if path in known and _differs(known[path][0], seg):
                m, etag = known[path]
                self.tracker.update(moved(m, seg), etag)
                out.changed += 1
        for path in sorted(known.keys() - now.keys()):
            m, etag = known[path]
            if claim.quarantine:
                try:
                    self.objects.copy(path, QUARANTINE_PREFIX + path)
                    out.quarantined += 1
                except FileNotFoundError:  # nothing to keep: the loss is recorded instead
                    self._record_loss(path, m, "its segment object is missing")
                    out.lost[path] = m.count
            self.tracker.remove(path, etag)
            self.objects.delete(path)
            out.removed += 1
        return out

    def _create(self, store: DeadLetterStore, seg: SegmentInfo) -> None:
        sha256 = upload_segment(store, self.objects, seg)
        if sha256 is None:
            raise DamagedObjectError(f"{seg.path}: the segment just written reads back damaged")
        if not self.tracker.create(Manifest.of(seg, sha256, origin(store))):
            raise FileExistsError(f"{self.tracker.key(seg.path)} exists already")

    def close(self) -> None:
        """Close the mirror and remove the scratch root."""
        self.store.close()
        self._tmp.cleanup()

    def __enter__(self) -> BucketView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _differs(m: Manifest, seg: SegmentInfo) -> bool:
    return (m.status, m.count, m.size) != (seg.status, seg.count, seg.bytes)


def busy_lines(busy: Iterable[Busy]) -> list[str]:
    """One line per segment another holder has leased."""
    return [f"{b.name}: leased by {b.holder} until {b.expires_at:.0f}" for b in busy]
