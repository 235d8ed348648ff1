"""``ChangeVerifier``: every change of the store verified against the index once it has settled.

It reads the app's notification entries (``framework.notifications``) as one consumer, only
entries older than ``settle`` seconds (longer than the projector takes to follow a write). For
each view the entries name documents of, it first screens them, ``page`` at a time: it reads
the projector's record of what it wrote (``digests.WRITTEN``) and the index's copy
(``SearchIndex.get_many``). A document whose copy's digest (version and content) equals the
recorded one is right as far as the index goes: the index still holds what the projector wrote
last. Every other one (no record, a copy missing, older, newer, edited or left behind by a
delete) and a random ``sample`` of the agreeing ones are rebuilt: projected from the
store's current rows (the projector's read; views sharing marks read the rows once) and
compared with the index's copy by ``compare.classify``, so the projector's reads stay checked
too. A rebuilt document found right has its record written again when it disagreed. A document
neither recorded nor in the index is one the projector has not written yet (or lost): the step
waits up to ``wait`` seconds for it, screening it again, then rebuilds it. A
difference is looked at once more ``recheck`` seconds later, store and index both read again;
only a difference found both times, for the same expected document, is a divergence. It is
repaired by ``project_partition`` at a delete floor of the version the index holds, the
routine ``converge spark check --repair`` runs on each divergent partition, so a document that
was right is never written; but a document the rows give none for that the index holds above
the partition's mark is deleted without a tombstone at its version (``delete_orphan``), which
would refuse the partition's later writes below it.

A repair the index refuses (a 409: it holds a version above the one written, a delete tombstone
say) is no repair: it is counted as ``refused``, logged and handed to ``park`` once, with the
reason; a later look tries again and reports it no more while it stays the same.

An ``ahead`` document (a version above the partition's mark, which the index will not lower)
is not repairable by projecting: when it is above the mark by no more than hand edits make
(``HAND_EDIT_BUMPS``: a plain ``PUT`` or ``_update`` raises the version by one), the rebuilt
document is written at the version the index holds (``external_gte`` takes an equal version),
which restores its content and shadows no later write the damage did not already shadow: a
stream write above that version replaces it, and one at or below it was refused by the damage
already (its change, verified later, finds the document again). Any other ``ahead`` document is
handed to ``park`` (the worker and the command park it in the dead-letter log for an operator,
``framework.verify.park``). Either is remembered with the copy of the index it saw (table
``converge_verify_settled``): the same copy is neither parked nor counted again, and a sweep
records it as verified. The checkpoint moves past a batch of entries only once every document
they name is verified, repaired or parked: a verifier stopped before that verifies them again.

An aggregate's contributions are compared by content only: their write times may be above the
entity's mark by design (``framework.aggregates.contributions``).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import itertools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.aggregate import Aggregate
from framework.core.mutations import CellValue, Upsert
from framework.core.projection import Document, PartitionKey, Projection
from framework.core.schema import Column, TableSchema
from framework.metrics.summary import bucket_quantile
from framework.notifications.entries import TenantOf, key_ident
from framework.notifications.reader import NotificationReader
from framework.runtime.projector import project_partition, read_shared_sources, write_document
from framework.verify.changes import Changed, changed_documents
from framework.verify.compare import CATEGORIES, Category, as_stored, classify, same_content
from framework.verify.digests import (
    WRITTEN,
    Written,
    hit_digest,
    read_written,
    rows_digest,
    written_upsert,
)
from stores.base import SearchHit, SearchIndex, WideColumnStore

__all__ = [
    "ChangeVerifier", "Divergence", "Differing", "VerifyStats", "Park", "Right", "CONSUMER", "LAG_BUCKETS",
    "HAND_EDIT_BUMPS", "SETTLED", "delete_orphan", "DEFAULT_SAMPLE", "DEFAULT_BATCH",
    "DEFAULT_EVERY",
]  # fmt: skip

log = logging.getLogger(__name__)

#: The notification consumer (and checkpoint) name of an app's verifier.
CONSUMER = "converge-verify"
#: Upper bounds (seconds) of the buckets of the time from a change's ingestion to its verification.
LAG_BUCKETS = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1800.0)
#: The most an ``ahead`` document's version may exceed its partition's mark to be taken for hand
#: edits of a projected document (each ``PUT`` or ``_update`` raises it by one) and rewritten at
#: its version; one further ahead is parked for an operator.
HAND_EDIT_BUMPS = 100
#: Notification entries a step reads at most (``ChangeVerifier``'s ``batch``).
DEFAULT_BATCH = 1000
#: Seconds from one step's start to the next while the verifier is caught up (``ChangeVerifier``'s
#: ``every``): a document changed again within them is verified once.
DEFAULT_EVERY = 10.0
#: The fraction of changed documents rebuilt from the rows although their record agrees (the
#: setting ``verify_sample``).
DEFAULT_SAMPLE = 0.01
#: What the verifier did about a document it could not repair by projecting, with the copy of
#: the index it saw: ``how`` is ``parked`` or ``rewritten`` (an ``ahead`` document) or
#: ``refused`` (a repair the index refused); ``index_digest`` is that copy's ``hit_digest`` (after
#: the rewrite, for one rewritten), ``expected_version`` the partition's mark then.
SETTLED = TableSchema(
    name="converge_verify_settled",
    partition_key=(Column("app", "text"), Column("view_name", "text"), Column("doc_id", "text")),
    columns=(Column("how", "text"), Column("index_digest", "text"), Column("expected_version", "bigint")),
)


@dataclass(frozen=True)
class Divergence:
    """A document found to differ twice: the view, the partition, how, and both versions."""

    view: str
    doc_id: str
    key: PartitionKey
    category: Category
    expected_version: int
    index_version: int | None


#: ``park(divergence, reason)``: keep an unrepairable divergence for an operator.
Park = Callable[[Divergence, str], Awaitable[None]]
#: A document found right: its view, id, the index's copy and the digest of its rows.
Right = tuple[Projection, str, SearchHit | None, int]
#: Documents that differ, by (view name, document id): partition, view, expected, the copy found.
Differing = dict[tuple[str, str], tuple[PartitionKey, Projection, Document, SearchHit | None]]


async def _log_only(divergence: Divergence, reason: str) -> None:
    log.error("verify: %s %s %s %s: %s", divergence.view, divergence.doc_id, divergence.key,
              divergence.category, reason)  # fmt: skip


@dataclass(frozen=True)
class _Settled:
    how: str
    index_digest: int
    expected_version: int


async def delete_orphan(target: SearchIndex, alias: str, doc_id: str, held: int, version: int) -> bool:
    """Delete a document the rows give none for, which the index holds at ``held``, so that no
    later write is refused for it. At ``version`` (the projector's delete: the partition's mark,
    0 without one) when ``held`` is not above it; else, where the index can (``remove``: an
    Elasticsearch or noida-db index), removed while it is still that copy, with no tombstone at
    ``held``, then deleted at ``version`` as the projector would; else (an index without
    ``remove``) at ``held``, whose tombstone refuses the writes below it. False when the index
    refused, or held another copy by then."""
    if held <= version:
        return (await write_document(target, alias, (doc_id, None, version)))[0] == "delete"
    remove = getattr(target, "remove", None)
    if remove is None:
        return (await write_document(target, alias, (doc_id, None, version), held))[0] == "delete"
    if not await remove(alias, doc_id, held):
        return False
    if version > 0:
        await target.delete(alias, doc_id, version)
    return True


@dataclass
class VerifyStats:
    """What the verifier did since it started."""

    verified: int = 0  # documents compared (a document named by several entries counts once a batch)
    screened: int = 0  # changed documents compared with the projector's record (digests)
    disagreed: int = 0  # of those, whose record disagreed (no record, behind the mark, another copy)
    sampled: int = 0  # of those, agreeing, rebuilt as the sample
    rebuilt: int = 0  # changed documents rebuilt from the rows and compared in full
    entries: int = 0  # notification entries committed
    errors: int = 0  # steps that failed (and were retried)
    divergent: collections.Counter[str] = field(default_factory=collections.Counter)
    repaired: collections.Counter[str] = field(default_factory=collections.Counter)
    parked: collections.Counter[str] = field(default_factory=collections.Counter)
    #: repairs the index refused (a 409), by category: each counted once while it stays the same
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    #: documents by seconds from their change's ingestion to their verification, per bucket of
    #: ``LAG_BUCKETS`` (the last: beyond them), and the sum of those seconds
    lag_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))
    lag_sum: float = 0.0
    last_position: int | None = None  # ingestion time (epoch µs) of the last committed entry
    #: ingestion time (epoch µs) of the oldest change read and not verified yet (an upper bound
    #: after a full batch: the next one is no older than its last); None when every settled
    #: change is verified
    unverified_since: int | None = None
    stepped: bool = False  # a batch of entries was read at least once
    sweeps: int = 0  # full sweeps finished (``framework.verify.sweep``)
    last_sweep_at: float | None = None  # when the last full sweep finished (epoch seconds)

    def observe_lag(self, seconds: float) -> None:
        """Count one document verified ``seconds`` after its change's ingestion."""
        self.lag_counts[bisect.bisect_left(LAG_BUCKETS, seconds)] += 1
        self.lag_sum += seconds

    def lag_buckets(self) -> list[tuple[float, int]]:
        """The cumulative ``(upper bound, documents)`` buckets, the last bound infinite."""
        return list(zip((*LAG_BUCKETS, math.inf), itertools.accumulate(self.lag_counts), strict=True))

    def behind(self, now: float) -> float | None:
        """Seconds since the oldest change not verified yet was ingested (``now``: epoch seconds),
        0 when every settled change is verified, None before the first read of entries."""
        if not self.stepped:
            return None
        return 0.0 if self.unverified_since is None else max(0.0, now - self.unverified_since / 1e6)

    def lag(self, quantile: float) -> float | None:
        """The ``quantile`` (0..1) of the lags, estimated from the buckets; None before any."""
        return bucket_quantile(self.lag_buckets(), quantile)

    def to_dict(self) -> dict[str, Any]:
        """The counts, the lag quantiles and the position, as JSON-able data."""
        return {
            "verified": self.verified, "entries": self.entries, "errors": self.errors,
            "screened": self.screened, "disagreed": self.disagreed, "sampled": self.sampled,
            "rebuilt": self.rebuilt,
            "divergent": {c: self.divergent[c] for c in CATEGORIES},
            "repaired": {c: self.repaired[c] for c in CATEGORIES},
            "parked": {c: self.parked[c] for c in CATEGORIES},
            "refused": {c: self.refused[c] for c in CATEGORIES},
            "lag_p50_seconds": self.lag(0.5), "lag_p99_seconds": self.lag(0.99),
            "lag_buckets": [[None if b == math.inf else b, n] for b, n in self.lag_buckets()],
            "lag_sum": self.lag_sum,
            "last_position": self.last_position, "unverified_since": self.unverified_since,
            "sweeps": self.sweeps, "last_sweep_at": self.last_sweep_at,
        }  # fmt: skip


class ChangeVerifier:
    """Verifies the documents of ``views`` that the entries ``reader`` returns name.

    ``targets``: where each view's documents are (by view name: the index for a projection,
    the contributions for an aggregate). ``page``: documents read and compared at a time;
    ``batch``: entries read a step (a document several of them name is verified once, in its
    state after them all); ``every``: the seconds from one step's start to the next while caught
    up (``run``). ``app``: the app's name, the key of what it remembers of the documents it parked,
    rewrote or could not repair (``SETTLED``, in ``store``). ``sample``: the fraction of changed
    documents whose record agrees that are rebuilt all the same (0: none, 1: every one, as
    without records). ``wait``: the seconds at most a step waits,
    for the documents neither recorded nor in the index (a projector behind the settle time),
    screening them again after 1, 2, 4... seconds, before they are rebuilt as missing (0: at
    once; only where projectors record). ``sleep``,
    ``clock`` and ``draw`` (a number in [0, 1) per document, for the sample) are injectable for
    tests.
    """

    def __init__(
        self,
        views: Sequence[Projection],
        store: WideColumnStore,
        targets: dict[str, SearchIndex],
        reader: NotificationReader,
        *,
        recheck: float = 5.0,
        page: int = 500,
        park: Park = _log_only,
        tenant_of: TenantOf | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        app: str = "",
        sample: float = DEFAULT_SAMPLE,
        draw: Callable[[], float] = random.random,
        wait: float = 0.0,
        batch: int = DEFAULT_BATCH,
        every: float = DEFAULT_EVERY,
    ) -> None:
        missing = [v.name for v in views if v.name not in targets]
        if missing:
            raise ValueError(f"no target for views {missing}")
        if recheck < 0 or every < 0 or page < 1 or batch < 1 or not 0.0 <= sample <= 1.0:
            raise ValueError(
                "recheck and every must be non-negative, page and batch at least 1 and sample from 0 to 1"
            )
        self.views, self.store, self.targets, self.reader = list(views), store, targets, reader
        self.recheck, self.page, self.park, self.tenant_of = recheck, page, park, tenant_of
        self.clock, self.sleep, self.app = clock, sleep, app
        self.sample, self.draw, self.wait, self.batch, self.every = sample, draw, wait, batch, every
        self.stats = VerifyStats()
        self._ensured = False
        self._written_at = 0

    async def ensure(self) -> None:
        """Create the table of what it remembers (``SETTLED``) if missing."""
        if not self._ensured:
            await self.store.ensure_table(SETTLED)
            await self.store.ensure_table(WRITTEN)
            self._ensured = True

    async def step(self) -> int:
        """Verify one batch of settled entries and commit past it; the entries it covered (0:
        nothing settled to verify)."""
        entries = await self.reader.read(self.batch)
        self.stats.stepped = True
        if not entries:
            self.stats.unverified_since = None
            return 0
        self.stats.unverified_since = min(e.ingested_at for e in entries)
        groups: dict[str, list[Changed]] = {}  # views sharing marks read their rows once
        for changed in await changed_documents(entries, self.views, self.store, self.tenant_of):
            groups.setdefault(changed.view.version_table.name, []).append(changed)
        for group in groups.values():
            await self._verify(group)
        await self.reader.commit(entries)
        self.stats.entries += len(entries)
        self.stats.last_position = entries[-1].ingested_at
        # a full batch: more may have settled, none older than its last
        self.stats.unverified_since = entries[-1].ingested_at if len(entries) >= self.batch else None
        return len(entries)

    async def run(
        self,
        stop: asyncio.Event,
        idle: float = 1.0,
        retry: float = 5.0,
        between: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """``step`` until ``stop`` is set, pausing ``idle`` seconds when nothing has settled and
        ``retry`` seconds after a failed step (a store or index outage, another instance's
        commit: the batch is verified again); a step that read less than a full batch (caught up)
        starts the next ``every`` seconds after its own start, so a document changed again
        meanwhile is verified once. ``between`` runs before each step (a sweep when one is due:
        ``Sweep.when_due``); its failure is counted and logged, and the step runs."""
        while not stop.is_set():
            started = time.monotonic()
            if between is not None:
                try:
                    await between()
                except Exception as exc:  # noqa: BLE001 - a failed sweep must not stop the verifier
                    self.stats.errors += 1
                    log.warning("verify: a sweep failed (%r)", exc)
            try:
                done = await self.step()
                pause = idle if done == 0 else 0.0
                if 0 < done < self.batch:
                    pause = max(0.0, self.every - (time.monotonic() - started))
            except Exception as exc:  # noqa: BLE001 - the verifier must outlive an outage
                self.stats.errors += 1
                log.warning("verify: a step failed (%r); again in %gs", exc, retry)
                pause = retry
            if pause:
                try:
                    await asyncio.wait_for(stop.wait(), pause)
                except TimeoutError:
                    pass

    async def _verify(self, group: list[Changed]) -> None:
        """Verify the changed documents of views sharing a version table (so the same sources):
        screened against the projector's records, the disagreeing and a sample rebuilt."""
        keys = {key_ident(k): k for c in group for k in c.keys.values()}
        views = [c.view for c in group]
        await self.ensure()
        rebuild, disagreed, unwritten = await self.screen(views, list(keys.values()))
        waited, pause = 0.0, 1.0
        while unwritten and waited < self.wait:  # the projector behind: give it ``wait`` seconds
            pause = min(pause, self.wait - waited)
            await self.sleep(pause)
            waited += pause
            pause *= 2
            more, differ, unwritten = await self.screen(views, unwritten, sample=False)
            rebuild, disagreed = rebuild + more, disagreed | differ
        if unwritten:  # still nothing written: rebuilt, as a document missing from the index
            self.stats.rebuilt += len(unwritten)
            rebuild += unwritten
        if rebuild:
            right: list[Right] = []
            await self.verify_keys(views, rebuild, right)
            await self._record_right(right, disagreed)
        self.stats.verified += sum(len(c.keys) for c in group)
        now = self.clock()
        for c in group:
            for at in c.since.values():
                self.stats.observe_lag(now - at / 1e6)

    async def screen(
        self, views: list[Projection], keys: list[PartitionKey], *, sample: bool = True
    ) -> tuple[list[PartitionKey], set[tuple[str, str]], list[PartitionKey]]:
        """Compare the index's copies of the documents of ``views`` (sharing a version table) at
        ``keys`` with the projector's records: the keys to rebuild (a document of theirs
        disagrees, or drawn for the sample unless not ``sample``), the disagreeing documents by
        (view name, document id), and the keys whose only disagreement is documents neither
        recorded nor in the index (not projected yet, or lost: not rebuilt here)."""
        rebuild: dict[str, PartitionKey] = {}
        unwritten: dict[str, PartitionKey] = {}
        disagreed: set[tuple[str, str]] = set()
        stats = self.stats
        for i in range(0, len(keys), self.page):
            chunk = keys[i : i + self.page]
            idents = [key_ident(key) for key in chunk]
            for view in views:
                versions = not isinstance(view, Aggregate)
                ids = [view.document_id(key) for key in chunk]
                records = await read_written(self.store, view.name, ids)
                found = await self.targets[view.name].get_many(view.alias, ids)
                stats.screened += len(ids)
                for j, (record, hit) in enumerate(zip(records, found, strict=True)):
                    if record is None:
                        if hit is None:
                            unwritten[idents[j]] = chunk[j]
                            continue
                    elif record.doc == hit_digest(hit, versions=versions):
                        continue
                    stats.disagreed += 1
                    disagreed.add((view.name, ids[j]))
                    rebuild[idents[j]] = chunk[j]
            if sample and self.sample > 0:
                for ident, key in zip(idents, chunk, strict=True):
                    if ident not in rebuild and ident not in unwritten and self.draw() < self.sample:
                        stats.sampled += 1
                        rebuild[ident] = key
        stats.rebuilt += len(rebuild)
        return list(rebuild.values()), disagreed, [k for i, k in unwritten.items() if i not in rebuild]

    async def _record_right(self, right: list[Right], disagreed: set[tuple[str, str]]) -> None:
        """Record again the projections' documents found right whose record disagreed (their
        copy, at its version; the digest of their row versions unknown)."""
        at = int(self.clock() * 1e6)
        writes = []
        for view, doc_id, hit, _ in right:
            if (view.name, doc_id) in disagreed and not isinstance(view, Aggregate):
                version = 0 if hit is None else hit.version or 0
                writes.append(written_upsert(view.name, doc_id, Written(version, hit_digest(hit), 0), at))
        if writes:
            await self.store.apply(writes)

    async def verify_keys(
        self,
        views: list[Projection],
        keys: list[PartitionKey],
        right: list[Right] | None = None,
        recheck: float | None = None,
    ) -> list[PartitionKey]:
        """Compare the documents of ``views`` (sharing a version table) at ``keys``, look again
        ``recheck`` seconds later (default: the verifier's) at those that differ, repair or park
        what differs twice; the keys of the partitions repaired. ``right``: receives each
        document found right at the first look, with the digest of its rows."""
        first = await self.first_look(views, keys, right)
        if not first:
            return []
        await self.sleep(self.recheck if recheck is None else recheck)
        return await self.second_look(views, first)

    async def first_look(
        self, views: list[Projection], keys: list[PartitionKey], right: list[Right] | None = None
    ) -> Differing:
        """The documents of ``views`` at ``keys`` that differ from their copy (``right``: as in
        ``verify_keys``)."""
        return await self._compare(views, keys, right)

    async def second_look(self, views: list[Projection], first: Differing) -> list[PartitionKey]:
        """Compare again what differed at the ``first`` look; repair or park what differs the
        same way; the keys of the partitions repaired."""
        repaired: dict[str, PartitionKey] = {}
        differing = {key_ident(key): key for key, _, _, _ in first.values()}
        again = await self._compare(views, list(differing.values()))
        for where, (key, view, expected, found) in again.items():
            before = first.get(where)
            if before is None or before[2] != expected:  # the store moved on: no longer the same
                continue
            if await self._settle(view, key, expected, found):
                repaired[key_ident(key)] = key
        return list(repaired.values())

    async def right_now(self, views: list[Projection], keys: list[PartitionKey], right: list[Right]) -> None:
        """Add to ``right`` the documents of ``views`` at ``keys`` that are right now (one look:
        the others are left as they are)."""
        await self._compare(views, keys, right)

    async def _compare(
        self, views: list[Projection], keys: list[PartitionKey], right: list[Right] | None = None
    ) -> Differing:
        """The documents of ``views`` among ``keys`` whose copy in the target differs, by view
        name and document id; the views' rows are read once."""
        out: Differing = {}
        marks_table = views[0].version_table.name
        for i in range(0, len(keys), self.page):
            chunk = keys[i : i + self.page]
            marks, rows = await read_shared_sources(self.store, views[0], chunk)
            for view in views:
                versions = not isinstance(view, Aggregate)
                expected = [view.document(key, rows[j], marks[j]) for j, key in enumerate(chunk)]
                if not versions:  # an entity without contributions has none stored: no document
                    expected = [(doc_id, doc or None, v) for doc_id, doc, v in expected]
                found = await self.targets[view.name].get_many(view.alias, [doc[0] for doc in expected])
                categories = [
                    classify(doc, hit, versions=versions) for doc, hit in zip(expected, found, strict=True)
                ]
                ahead = [doc[0] for doc, c in zip(expected, categories, strict=True) if c == "ahead"]
                settled = await self._settled(view, ahead) if ahead else {}
                for j, (key, doc, hit) in enumerate(zip(chunk, expected, found, strict=True)):
                    category = categories[j]
                    if category == "ahead" and self._dealt_with(settled.get(doc[0]), doc, hit):
                        category = None  # parked or rewritten before, and the index still holds that copy
                    if category is not None:
                        out[(view.name, doc[0])] = (key, view, doc, hit)
                    elif right is not None:
                        digest = rows_digest(marks_table, marks[j], rows[j])
                        right.append((view, doc[0], hit, digest))
        return out

    @staticmethod
    def _dealt_with(settled: _Settled | None, expected: Document, found: SearchHit | None) -> bool:
        """Whether an ``ahead`` copy ``found`` was parked, or rewritten with the content it still
        should hold, when the index held it last."""
        if settled is None or found is None or settled.index_digest != hit_digest(found):
            return False
        return settled.how == "parked" or (settled.how == "rewritten" and same_content(expected[1], found))

    async def _settled(self, view: Projection, doc_ids: Sequence[str]) -> dict[str, _Settled]:
        """What is remembered of ``view``'s documents ``doc_ids``, by document id."""
        await self.ensure()
        keys = [{"app": self.app, "view_name": view.name, "doc_id": d} for d in doc_ids]
        out: dict[str, _Settled] = {}
        for doc_id, rows in zip(doc_ids, await self.store.read_partitions(SETTLED.name, keys), strict=True):
            cells = rows[0].values() if rows else {}
            if cells.get("how"):
                out[doc_id] = _Settled(str(cells["how"]), int(str(cells.get("index_digest") or "0"), 16),
                                       int(str(cells.get("expected_version") or 0)))  # fmt: skip
        return out

    async def _remember(
        self, view: Projection, doc_id: str, how: str, found: SearchHit | None, expected_version: int
    ) -> None:
        await self.ensure()
        self._written_at = max(int(self.clock() * 1e6), self._written_at + 1)  # write times rise
        key = {"app": self.app, "view_name": view.name, "doc_id": doc_id}
        cells: dict[str, CellValue] = {"how": how, "index_digest": f"{hit_digest(found):x}",
                                       "expected_version": expected_version}  # fmt: skip
        await self.store.apply([Upsert(SETTLED.name, key, cells, self._written_at)])

    async def _settle(
        self, view: Projection, key: PartitionKey, expected: Document, found: SearchHit | None
    ) -> bool:
        """Repair (True) or park a document found to differ twice."""
        category = classify(expected, found, versions=not isinstance(view, Aggregate))
        if category is None:
            return False
        doc_id, doc, version = expected
        held = None if found is None else found.version
        divergence = Divergence(view.name, doc_id, dict(key), category, version, held)
        before = (await self._settled(view, [doc_id])).get(doc_id)
        reported = (before is not None and before.how == "refused" and before.expected_version == version
                    and before.index_digest == hit_digest(found))  # fmt: skip
        if not reported:  # a refusal reported before is tried again, not counted again
            self.stats.divergent[category] += 1
            log.warning("verify: %s document %s is %s (store version %s, index %s)",
                        view.name, doc_id, category, version, held)  # fmt: skip
        if category == "ahead":
            return await self._ahead(view, divergence, expected, found)
        target = self.targets[view.name]
        if category == "orphaned" and held is not None and held > version:
            done = await delete_orphan(target, view.alias, doc_id, held, version)
        else:
            action, _ = await project_partition(self.store, target, view, key, floor=held or 0)
            done = action != "stale"
        if done:
            if reported:
                self.stats.divergent[category] += 1
            self.stats.repaired[category] += 1
            return True
        if reported:
            return False
        self.stats.refused[category] += 1
        write = f"a delete at version {max(version, held or 0)}" if doc is None else f"version {version}"
        reason = (f"the index refused the repair ({write}): it holds a newer version of document {doc_id}, "
                  f"a delete tombstone or the document (index version {held}); remove it from the index, "
                  f"then replay this record")  # fmt: skip
        await self.park(divergence, reason)
        await self._remember(view, doc_id, "refused", found, version)
        return False

    async def _ahead(
        self, view: Projection, divergence: Divergence, expected: Document, found: SearchHit | None
    ) -> bool:
        """Rewrite an ``ahead`` document at the version the index holds when hand edits may have
        raised it there (True), else park it."""
        doc_id, doc, version = expected
        held = divergence.index_version or 0
        if doc is not None and held - version <= HAND_EDIT_BUMPS:
            action, _ = await write_document(self.targets[view.name], view.alias, (doc_id, doc, held))
            if action == "stale":  # written above it since the second look: the next look sees it
                return False
            self.stats.repaired["ahead"] += 1
            log.warning("verify: %s document %s rewritten at the index's version %s (the partition's mark "
                        "is %s: edited by hand?)", view.name, doc_id, held, version)  # fmt: skip
            await self._remember(view, doc_id, "rewritten", SearchHit(doc_id, held, as_stored(doc)), version)
            return True
        self.stats.parked["ahead"] += 1
        await self.park(divergence, f"the index holds version {held}, above the partition's mark "
                                    f"{version} by more than hand edits make ({HAND_EDIT_BUMPS}): a "
                                    f"projection cannot lower it; delete the document from the index, "
                                    f"then replay this record")  # fmt: skip
        await self._remember(view, doc_id, "parked", found, version)
        return False
