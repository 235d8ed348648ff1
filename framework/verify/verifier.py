"""``ChangeVerifier``: every change of the store verified against the index once it has settled.

It reads the app's notification entries (``framework.notifications``) as one consumer, only
entries older than ``settle`` seconds (longer than the projector takes to follow a write). For
each view the entries name documents of, it projects those documents from the store's current
rows (the projector's read; views sharing marks read the rows once) and compares them with
the index's, read ``page`` documents at a time (``SearchIndex.get_many``), by
``compare.classify``. A
difference is looked at once more ``recheck`` seconds later, store and index both read again;
only a difference found both times, for the same expected document, is a divergence. It is
repaired by ``project_partition`` at a delete floor of the version the index holds, the
routine ``converge spark check --repair`` runs on each divergent partition, so a document that
was right is never written. An ``ahead`` document (a version above the partition's mark, which
the index will not lower) is not repairable that way: it is handed to ``park`` (the worker and
the command park it in the dead-letter log for an operator, ``framework.verify.park``). The
checkpoint moves past a page of entries only once every document they name is verified,
repaired or parked: a verifier stopped before that verifies them again.

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
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.aggregate import Aggregate
from framework.core.projection import Document, PartitionKey, Projection
from framework.metrics.summary import bucket_quantile
from framework.notifications.entries import TenantOf, key_ident
from framework.notifications.reader import NotificationReader
from framework.runtime.projector import project_partition, read_shared_sources
from framework.verify.changes import Changed, changed_documents
from framework.verify.compare import CATEGORIES, Category, classify
from framework.verify.digests import rows_digest
from stores.base import SearchHit, SearchIndex, WideColumnStore

__all__ = [
    "ChangeVerifier", "Divergence", "Differing", "VerifyStats", "Park", "Right", "CONSUMER", "LAG_BUCKETS",
]  # fmt: skip

log = logging.getLogger(__name__)

#: The notification consumer (and checkpoint) name of an app's verifier.
CONSUMER = "converge-verify"
#: Upper bounds (seconds) of the buckets of the time from a change's ingestion to its verification.
LAG_BUCKETS = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1800.0)


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


@dataclass
class VerifyStats:
    """What the verifier did since it started."""

    verified: int = 0  # documents compared (a document named by several entries counts once a page)
    entries: int = 0  # notification entries committed
    errors: int = 0  # steps that failed (and were retried)
    divergent: collections.Counter[str] = field(default_factory=collections.Counter)
    repaired: collections.Counter[str] = field(default_factory=collections.Counter)
    parked: collections.Counter[str] = field(default_factory=collections.Counter)
    #: documents by seconds from their change's ingestion to their verification, per bucket of
    #: ``LAG_BUCKETS`` (the last: beyond them), and the sum of those seconds
    lag_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))
    lag_sum: float = 0.0
    last_position: int | None = None  # ingestion time (epoch µs) of the last committed entry
    sweeps: int = 0  # full sweeps finished (``framework.verify.sweep``)
    last_sweep_at: float | None = None  # when the last full sweep finished (epoch seconds)

    def observe_lag(self, seconds: float) -> None:
        """Count one document verified ``seconds`` after its change's ingestion."""
        self.lag_counts[bisect.bisect_left(LAG_BUCKETS, seconds)] += 1
        self.lag_sum += seconds

    def lag_buckets(self) -> list[tuple[float, int]]:
        """The cumulative ``(upper bound, documents)`` buckets, the last bound infinite."""
        return list(zip((*LAG_BUCKETS, math.inf), itertools.accumulate(self.lag_counts), strict=True))

    def lag(self, quantile: float) -> float | None:
        """The ``quantile`` (0..1) of the lags, estimated from the buckets; None before any."""
        return bucket_quantile(self.lag_buckets(), quantile)

    def to_dict(self) -> dict[str, Any]:
        """The counts, the lag quantiles and the position, as JSON-able data."""
        return {
            "verified": self.verified, "entries": self.entries, "errors": self.errors,
            "divergent": {c: self.divergent[c] for c in CATEGORIES},
            "repaired": {c: self.repaired[c] for c in CATEGORIES},
            "parked": {c: self.parked[c] for c in CATEGORIES},
            "lag_p50_seconds": self.lag(0.5), "lag_p99_seconds": self.lag(0.99),
            "lag_buckets": [[None if b == math.inf else b, n] for b, n in self.lag_buckets()],
            "lag_sum": self.lag_sum,
            "last_position": self.last_position,
            "sweeps": self.sweeps, "last_sweep_at": self.last_sweep_at,
        }  # fmt: skip


class ChangeVerifier:
    """Verifies the documents of ``views`` that the entries ``reader`` returns name.

    ``targets``: where each view's documents are (by view name: the index for a projection,
    the contributions for an aggregate). ``page``: entries read, and documents compared, at a
    time. ``sleep`` and ``clock`` are injectable for tests.
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
    ) -> None:
        missing = [v.name for v in views if v.name not in targets]
        if missing:
            raise ValueError(f"no target for views {missing}")
        if recheck < 0 or page < 1:
            raise ValueError("recheck must be non-negative and page at least 1")
        self.views, self.store, self.targets, self.reader = list(views), store, targets, reader
        self.recheck, self.page, self.park, self.tenant_of = recheck, page, park, tenant_of
        self.clock, self.sleep = clock, sleep
        self.stats = VerifyStats()

    async def step(self) -> int:
        """Verify one page of settled entries and commit past it; the entries it covered (0:
        nothing settled to verify)."""
        entries = await self.reader.read(self.page)
        if not entries:
            return 0
        groups: dict[str, list[Changed]] = {}  # views sharing marks read their rows once
        for changed in await changed_documents(entries, self.views, self.store, self.tenant_of):
            groups.setdefault(changed.view.version_table.name, []).append(changed)
        for group in groups.values():
            await self._verify(group)
        await self.reader.commit(entries)
        self.stats.entries += len(entries)
        self.stats.last_position = entries[-1].ingested_at
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
        commit: the page is verified again). ``between`` runs before each step (a sweep when
        one is due: ``Sweep.when_due``); its failure is counted and logged, and the step runs."""
        while not stop.is_set():
            if between is not None:
                try:
                    await between()
                except Exception as exc:  # noqa: BLE001 - a failed sweep must not stop the verifier
                    self.stats.errors += 1
                    log.warning("verify: a sweep failed (%r)", exc)
            try:
                pause = idle if await self.step() == 0 else 0.0
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
        """Verify the changed documents of views sharing a version table (so the same sources)."""
        keys = {key_ident(k): k for c in group for k in c.keys.values()}
        await self.verify_keys([c.view for c in group], list(keys.values()))
        self.stats.verified += sum(len(c.keys) for c in group)
        now = self.clock()
        for c in group:
            for at in c.since.values():
                self.stats.observe_lag(now - at / 1e6)

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
                for j, (key, doc, hit) in enumerate(zip(chunk, expected, found, strict=True)):
                    if classify(doc, hit, versions=versions) is not None:
                        out[(view.name, doc[0])] = (key, view, doc, hit)
                    elif right is not None:
                        digest = rows_digest(marks_table, marks[j], rows[j])
                        right.append((view, doc[0], hit, digest))
        return out

    async def _settle(
        self, view: Projection, key: PartitionKey, expected: Document, found: SearchHit | None
    ) -> bool:
        """Repair (True) or park a document found to differ twice."""
        category = classify(expected, found, versions=not isinstance(view, Aggregate))
        if category is None:
            return False
        held = None if found is None else found.version
        divergence = Divergence(view.name, expected[0], dict(key), category, expected[2], held)
        self.stats.divergent[category] += 1
        log.warning("verify: %s document %s is %s (store version %s, index %s)",
                    view.name, expected[0], category, expected[2], held)  # fmt: skip
        if category == "ahead":
            self.stats.parked[category] += 1
            await self.park(divergence, f"the index holds version {held}, above the partition's mark "
                                        f"{expected[2]}: a projection cannot lower it")  # fmt: skip
            return False
        await project_partition(self.store, self.targets[view.name], view, key, floor=held or 0)
        self.stats.repaired[category] += 1
        return True
