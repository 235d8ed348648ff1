"""A full sweep: every document of every view checked, building in full only those whose digests
differ from the ledger's record of their last verification.

For each view the sweep reads the index's documents (a scan: only the index's copy witnesses
damage done behind the framework's back) and digests each (``hit_digest``), then scans the
view's source tables and version marks and digests each partition's rows (``rows_digest``): no
document is built. It compares the two sides top-down against the ledger
(``framework.verify.digests``): first one digest per bucket of document ids (the exclusive-or of
its documents' leaves, kept in ``converge_verified_buckets`` when the bucket was last found
right), then, in a bucket that differs, each document's record. A document whose digests both
equal its record is right (a projection is pure); any other one is verified in full as the
change verifier verifies a change (``ChangeVerifier.first_look`` and ``second_look``: built
from the store's rows and compared, looked at again, repaired or parked), and recorded once
found right (a repaired one: when a look after its repair finds it right). A document only the
index holds (no row, no mark: no partition key) is deleted when the second look finds it there
unchanged, with no tombstone at the version it holds where the index allows
(``verifier.delete_orphan``): a tombstone there would refuse the document the stream writes for
it later, at a lower version. The second look comes once for every view, at least ``settle``
seconds after the first.

The index is scanned before the store: a document's rows are written before it is, so a
partition absent from the later scan of the store was gone by then (an erasure, an expiry) and
its document is an orphan indeed. The first sweep of a view has no record and verifies every
document in full (the cost of ``converge spark check``); the next ones build only what changed
since, or was damaged.

A sweep whose repairs would delete more of a view's documents than ``max_deletes`` allows (its
orphans, and the documents whose partitions build none) refuses before its first write
(``RepairRefused``, ``framework.core.repair_guard``): a sweep pointed at an empty or another
store finds every document an orphan. ``run(force=True)`` passes the bound once.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from framework.coordination import CheckpointConflict, CheckpointStore
from framework.core.aggregate import Aggregate
from framework.core.mutations import CellValue, Mutation, Upsert
from framework.core.projection import PartitionKey, Projection
from framework.core.repair_guard import DEFAULT_MAX_DELETES, DeleteBound, RepairRefused, parse_delete_bound
from framework.core.schema import Column, TableSchema
from framework.notifications.entries import key_ident
from framework.verify.digests import BUCKETS, Ledger, Record, bucket_of, hit_digest, row_digest
from framework.verify.verifier import CONSUMER, ChangeVerifier, Differing, Right, delete_orphan

__all__ = ["BUCKET_DIGESTS", "RETRY", "Sweep", "SweepReport"]

log = logging.getLogger(__name__)

#: One digest per bucket of a view's ledger, written when the whole bucket was found right.
BUCKET_DIGESTS = TableSchema(
    name="converge_verified_buckets",
    partition_key=(Column("app", "text"), Column("view_name", "text")),
    clustering_key=(Column("bucket", "int"),),
    columns=(Column("digest", "text"),),
)

#: Ledger buckets read at a time.
_CHUNK = 64
#: Seconds at most from a failed sweep of ``when_due`` to the next attempt.
RETRY = 60.0
#: Index documents a page of the scan (the Spark check's page: fewer, larger requests).
_PAGE = 10_000
#: One bucket's documents as both scans give them: doc id -> (index digest, rows digest, partition
#: key, None for a document only the index holds).
Side = dict[str, tuple[int, int, PartitionKey | None]]


def _leaf(doc_id: str, index_digest: int, rows: int) -> int:
    data = b"%s:%x:%x" % (doc_id.encode("utf-8", "surrogatepass"), index_digest, rows)
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


@dataclass
class _Looked:
    """One view after the first look: the buckets that differ with both scans' documents, their
    records, the documents found right, differing, and only in the index (with their digests)."""

    view: Projection
    sides: dict[int, Side]
    records: dict[str, Record] = field(default_factory=dict)
    right: list[Right] = field(default_factory=list)
    differing: Differing = field(default_factory=dict)
    orphans: dict[str, int] = field(default_factory=dict)
    index_docs: int = 0

    def deletes(self) -> int:
        """The deletions a repair of what differs would make: the orphans, and the documents
        the index holds whose partitions build none."""
        built_none = sum(
            1 for _, _, doc, hit in self.differing.values() if doc[1] is None and hit is not None
        )
        return len(self.orphans) + built_none


@dataclass
class SweepReport:
    """What one sweep read and did, summed over the views."""

    documents: int = 0  # documents on either side (index, store)
    index_read: int = 0  # index documents scanned
    rows_read: int = 0  # store rows scanned (version marks included)
    buckets: int = 0  # buckets compared
    buckets_differing: int = 0
    verified_in_full: int = 0  # documents built from their rows and compared in full
    recorded: int = 0  # documents recorded right in the ledger
    orphans: int = 0  # index documents no partition maps to, looked at again
    divergent: collections.Counter[str] = field(default_factory=collections.Counter)
    repaired: collections.Counter[str] = field(default_factory=collections.Counter)
    parked: collections.Counter[str] = field(default_factory=collections.Counter)
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    started_at: float = 0.0
    finished_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The counts and times as JSON-able data."""
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, collections.Counter)}
        out.update({k: dict(v) for k, v in self.__dict__.items() if isinstance(v, collections.Counter)})
        return out


class Sweep:
    """Sweeps every view ``verifier`` verifies, with ``ledger`` as the record of verified ones.

    ``settle``: the projector's lag (the change verifier's settle time); a difference is looked
    at again no sooner, since a sweep, unlike the change verifier, meets changes still being
    projected. ``checkpoints``: where the last full sweep's report is kept (``checkpoint``);
    ``every``: the seconds between sweeps of ``when_due``. ``max_deletes``: the bound on the
    deletions of one sweep's repairs (default ``DEFAULT_MAX_DELETES``). ``clock`` gives the
    ledger's write times (epoch seconds) and the report's times."""

    def __init__(
        self,
        verifier: ChangeVerifier,
        ledger: Ledger,
        *,
        settle: float = 0.0,
        checkpoints: CheckpointStore | None = None,
        every: float | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        max_deletes: DeleteBound | None = None,
    ) -> None:
        if every is not None and every <= 0:
            raise ValueError(f"sweep: every must be positive, got {every}")
        self.verifier, self.ledger, self.checkpoints, self.every = verifier, ledger, checkpoints, every
        self.clock, self.settle = clock, settle
        self.sleep = sleep or verifier.sleep
        self.store = verifier.store
        self.max_deletes = max_deletes or parse_delete_bound(DEFAULT_MAX_DELETES)
        self._retry_at = 0.0

    @property
    def _second_look(self) -> float:
        """Seconds between the two looks at a difference: at least ``settle``, since a sweep
        also meets changes the projector has not written yet."""
        return max(self.settle, self.verifier.recheck)

    @property
    def checkpoint(self) -> str:
        """The checkpoint name keeping the last full sweep's report."""
        return f"{CONSUMER}.{self.ledger.app}.sweep"

    async def ensure(self) -> None:
        """Create the ledger's tables; take the last full sweep's time from the checkpoint."""
        await self.ledger.ensure()
        await self.store.ensure_table(BUCKET_DIGESTS)
        if self.checkpoints is not None:
            kept = await self.checkpoints.get(self.checkpoint)
            if kept is not None:
                self.verifier.stats.last_sweep_at = float(json.loads(kept.value)["finished_at"])

    async def when_due(self) -> SweepReport | None:
        """A full sweep when ``every`` seconds have passed since the last one finished (at once
        when none has; a failed one again ``RETRY`` seconds later at most); its report, None
        when none was due."""
        last, now = self.verifier.stats.last_sweep_at, self.clock()
        if self.every is None or (last is not None and now - last < self.every) or now < self._retry_at:
            return None
        try:
            report = await self.run()
        except Exception:
            self._retry_at = self.clock() + min(self.every, RETRY)
            raise
        log.info("verify: full sweep: %s", report.to_dict())
        return report

    async def run(
        self, views: Iterable[str] | None = None, *, fresh: bool = False, force: bool = False
    ) -> SweepReport:
        """Sweep every view (or those named in ``views``) once; the report (the verifier's stats
        also count what it found, repaired and parked). ``fresh``: ignore the ledger, verify
        every document in full and record it again (after a projection's code changed: the
        records hold what the old code built). ``RepairRefused`` before any write when the
        repairs would delete more than ``max_deletes`` allows, unless ``force``."""
        chosen = self.verifier.views
        if views is not None:
            names = set(views)
            unknown = names - {v.name for v in chosen}
            if unknown:
                raise ValueError(f"sweep: no view {sorted(unknown)} (views: {[v.name for v in chosen]})")
            chosen = [v for v in chosen if v.name in names]
        report = SweepReport(started_at=self.clock())
        before = (self.verifier.stats.divergent.copy(), self.verifier.stats.repaired.copy(),
                  self.verifier.stats.parked.copy(), self.verifier.stats.refused.copy())  # fmt: skip
        groups: dict[str, list[Projection]] = {}
        for view in chosen:
            groups.setdefault(view.version_table.name, []).append(view)
        looked: list[_Looked] = []
        for group in groups.values():
            indexed = {v.name: await self._scan_index(v, report) for v in group}
            partitions = await self._scan_rows(group[0], report)
            for view in group:
                looked.append(await self._first_look(view, indexed.pop(view.name), partitions, report, fresh))
            del partitions
        if not force:
            self._refuse_beyond_bound(looked)
        if any(v.differing or v.orphans for v in looked):
            await self.sleep(self._second_look)  # once for every view
        for v in looked:
            await self._second_look_at(v, report)
        stats = self.verifier.stats
        report.divergent += stats.divergent - before[0]
        report.repaired += stats.repaired - before[1]
        report.parked += stats.parked - before[2]
        report.refused += stats.refused - before[3]
        report.finished_at = self.clock()
        if views is None:
            stats.sweeps += 1
            stats.last_sweep_at = report.finished_at
            await self._keep_report(report)
        return report

    def _refuse_beyond_bound(self, looked: list[_Looked]) -> None:
        for v in looked:
            refusal = self.max_deletes.refusal(
                v.deletes(), v.index_docs, f"view {v.view.name} ({v.view.alias})"
            )
            if refusal is not None:
                raise RepairRefused(f"verify sweep: {refusal}")

    async def _keep_report(self, report: SweepReport) -> None:
        if self.checkpoints is None:
            return
        value = json.dumps(report.to_dict(), sort_keys=True)
        kept = await self.checkpoints.get(self.checkpoint)
        expected = None if kept is None else kept.version
        with contextlib.suppress(CheckpointConflict):  # another sweep's report, as recent
            await self.checkpoints.compare_and_set(self.checkpoint, value, expected)

    async def _scan_index(self, view: Projection, report: SweepReport) -> dict[str, int]:
        """The digest of each of the index's documents of ``view``, by document id."""
        versions = not isinstance(view, Aggregate)
        out: dict[str, int] = {}
        target = self.verifier.targets[view.name]
        await target.refresh(view.alias)
        async for hit in target.scan(view.alias, page_size=_PAGE):
            out[hit.doc_id] = hit_digest(hit, versions=versions)
        report.index_read += len(out)
        return out

    async def _scan_rows(self, view: Projection, report: SweepReport) -> dict[tuple[Any, ...], int]:
        """The digest of each partition's rows and mark in ``view``'s sources, by key values."""
        names = view.key_names
        out: dict[tuple[Any, ...], int] = {}
        for table in (view.version_table.name, *(t.name for t in view.tables)):
            async for row in self.store.scan(table):
                if not row.cells:
                    continue
                report.rows_read += 1
                key = row.key
                part = tuple(key[n] for n in names)
                out[part] = out.get(part, 0) ^ row_digest(table, row)
        return out

    async def _first_look(
        self,
        view: Projection,
        indexed: dict[str, int],
        partitions: dict[tuple[Any, ...], int],
        report: SweepReport,
        fresh: bool,
    ) -> _Looked:
        """Compare ``view``'s buckets, then its documents in the buckets that differ, with the
        ledger; build and compare the others once (``ChangeVerifier.first_look``)."""
        names = view.key_names
        sides: list[Side] = [{} for _ in range(BUCKETS)]
        for part, digest in partitions.items():
            partition: PartitionKey = dict(zip(names, part, strict=True))
            doc_id = view.document_id(partition)
            sides[bucket_of(doc_id)][doc_id] = (indexed.get(doc_id, 0), digest, partition)
        for doc_id, found in indexed.items():
            bucket = sides[bucket_of(doc_id)]
            if doc_id not in bucket:
                bucket[doc_id] = (found, 0, None)
        report.documents += sum(map(len, sides))
        report.buckets += BUCKETS
        kept = {} if fresh else await self._bucket_digests(view)
        differing = [b for b in range(BUCKETS) if fresh or kept.get(b, 0) != _bucket_digest(sides[b])]
        report.buckets_differing += len(differing)
        looked = _Looked(view, {b: sides[b] for b in differing}, index_docs=len(indexed))
        for i in range(0, len(differing), _CHUNK):
            looked.records.update(await self.ledger.read(view.name, differing[i : i + _CHUNK]))
        trusted = {} if fresh else looked.records
        keys: list[PartitionKey] = []
        for side in looked.sides.values():
            for doc_id, (found, rows, key) in side.items():
                record = trusted.get(doc_id)
                if record is not None and (record.index_digest, record.rows_digest) == (found, rows):
                    continue
                if key is None:
                    looked.orphans[doc_id] = found
                else:
                    keys.append(key)
        if keys:
            report.verified_in_full += len(keys)
            looked.differing = await self.verifier.first_look([view], keys, looked.right)
        report.orphans += len(looked.orphans)
        return looked

    async def _second_look_at(self, looked: _Looked, report: SweepReport) -> None:
        """Repair or park what still differs, delete the orphans still there, record what is right."""
        view = looked.view
        if looked.differing:
            await self.verifier.second_look([view], looked.differing)
            # record the repaired (and the parked) as they are now, so that the next sweep does not
            # build them again
            settled = {key_ident(key): key for key, _, _, _ in looked.differing.values()}
            await self.verifier.right_now([view], list(settled.values()), looked.right)
        if looked.orphans:
            await self._orphans(view, looked.orphans)
        versions = not isinstance(view, Aggregate)
        verified = [Record(doc_id, hit_digest(hit, versions=versions), rows)
                    for _, doc_id, hit, rows in looked.right]  # fmt: skip
        records, sides = looked.records, looked.sides
        gone = [r for doc_id, r in records.items() if doc_id not in sides[bucket_of(doc_id)]]
        now = int(self.clock() * 1e6)
        # a record of a document now absent on both sides is removed (both digests 0)
        await self.ledger.record(view.name, [*verified, *(Record(r.doc_id, 0, 0) for r in gone)], now)
        report.recorded += len(verified)
        records.update((r.doc_id, r) for r in verified)
        await self._keep_digests(view, sides, records, now)

    async def _orphans(self, view: Projection, orphans: dict[str, int]) -> None:
        """Delete the documents only the index held at the first look that it still holds,
        unchanged (``orphans``: their digests then)."""
        target = self.verifier.targets[view.name]
        versions = not isinstance(view, Aggregate)
        stats = self.verifier.stats
        doc_ids = list(orphans)
        for doc_id, hit in zip(doc_ids, await target.get_many(view.alias, doc_ids), strict=True):
            if hit is None or hit_digest(hit, versions=versions) != orphans[doc_id]:
                continue
            held = hit.version or 0
            stats.divergent["orphaned"] += 1
            log.warning("verify: %s document %s is orphaned (no partition in the store, index version %s)",
                        view.name, doc_id, held)  # fmt: skip
            if await delete_orphan(target, view.alias, doc_id, held, 0):
                stats.repaired["orphaned"] += 1

    async def _bucket_digests(self, view: Projection) -> dict[int, int]:
        rows = await self.store.read_partition(
            BUCKET_DIGESTS.name, {"app": self.ledger.app, "view_name": view.name}
        )
        return {int(str(r.key["bucket"])): int(str(r.values().get("digest") or "0"), 16) for r in rows}

    async def _keep_digests(
        self, view: Projection, sides: dict[int, Side], records: dict[str, Record], version: int
    ) -> None:
        """Keep the digest of each bucket of ``sides`` whose every document is recorded right."""
        writes: list[Mutation] = []
        for b, side in sides.items():
            if all((r := records.get(d)) is not None and (r.index_digest, r.rows_digest) == (f, rows)
                   for d, (f, rows, _) in side.items()):  # fmt: skip
                key: dict[str, CellValue] = {"app": self.ledger.app, "view_name": view.name, "bucket": b}
                digest = f"{_bucket_digest(side):x}"
                writes.append(Upsert(BUCKET_DIGESTS.name, key, {"digest": digest}, version))
        if writes:
            await self.store.apply(writes)


def _bucket_digest(side: Side) -> int:
    out = 0
    for doc_id, (found, rows, _) in side.items():
        out ^= _leaf(doc_id, found, rows)
    return out
