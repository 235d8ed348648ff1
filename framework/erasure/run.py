"""``erase``: remove one data subject from everything converge keeps, then record an audit entry.

The steps, in this order (each idempotent, so an interrupted erasure is run again):

1. the subject's keyed hash goes on the app's deny-list, so mappings
   (stream and backfill) drop its writes from then on (``screen``);
2. the store: each row found (``find``) gets a row tombstone, or cell
   tombstones over the declared columns, at ``MAX_VERSION`` (ID mutation's
   records of the subject's cells in ``converge_id_routes`` get row
   deletes at ``MAX_VERSION``: no request routes them back), and every
   projection over the table gets a version mark at the erasure time, all
   in one apply (with the erasure's own notification entry, when the app
   writes notifications: the erased keys, or "re-read" for rows keyed by
   the subject; stamped when written, again when the write was late:
   ``framework.notifications.stamping``);
   the same apply deletes, at ``MAX_VERSION``, the aggregates' groups that hold
   the subject in a personal part (``Aggregate.personal``) and the
   contributions of entities keyed by the subject (``framework.erasure.groups``);
3. the index: every touched partition is projected again, so its document is
   rebuilt without the erased cells or deleted, at the new mark; so are the
   aggregates' contributions, and the other groups keyed entities left are
   announced; then the version marks of partitions keyed by the subject are
   deleted at ``MAX_VERSION`` (a mark keeps its key);
4. notification entries listing the erased rows' keys are rewritten without them;
5. parked records that mention the subject are removed from the dead-letter
   WAL, and from the named export files;
6. delivery-ledger messages of the subject are deleted;
7. the audit entry: the keyed hash, the kind and the counts, never the value.

Why ``MAX_VERSION``: a tombstone written at ``2**63-1`` is the top of the
reconcile order (``framework.core.cells``: higher write time wins, and on a
tie the tombstone beats any live or expiring cell), so no write of the
subject's rows or cells, at any version, with or without TTL, can outrank
it: a replay of the original events or a backfill of the archive is
shadowed whatever versions it carries. The price: the erased row key (or
the erased cells of a kept row) can never be written again. The version
marks use the erasure time instead, so later writes of a kept row's other
cells keep ordering its documents.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from framework.core.mutations import MAX_VERSION, CellValue, Delete, Mutation, Upsert
from framework.core.projection import mark_writers
from framework.erasure.declare import Subject
from framework.erasure.find import declared_for, find_records, find_rows, finder, record_finder, spellings
from framework.erasure.groups import find_groups
from framework.erasure.keyed import subject_hash
from framework.erasure.tables import AUDIT_TABLE, DENYLIST_TABLE, ERASURE_TABLES
from framework.notifications.stamping import write_stamped
from stores.objects.store import ObjectStore

__all__ = ["ErasureReport", "erase", "ERASURE_BATCH"]

#: Prefix of the batch ids of the erasure's own notification entries.
ERASURE_BATCH = "erasure:"


@dataclass
class ErasureReport:
    """What an erasure removed (or, dry, would remove); no personal data in it."""

    app: str
    kind: str
    subject: str
    dry_run: bool
    erased_at: int
    scanned: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    documents: dict[str, int] = field(default_factory=dict)
    notifications: int = 0
    parked: int = 0
    parked_held_open: int = 0
    parked_damaged: int = 0
    exports: dict[str, int] = field(default_factory=dict)
    ledger: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """False when parked records could not be removed (a live writer's open segment, damage)."""
        return not (self.parked_held_open or self.parked_damaged)

    def counts(self) -> dict[str, Any]:
        """The counts, as the audit entry keeps them."""
        out = {k: v for k, v in asdict(self).items() if k not in ("app", "kind", "subject", "erased_at")}
        out.pop("dry_run")
        out["seconds"] = round(self.seconds, 3)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3), "complete": self.complete}


def _marks(app: Any, deletes: Sequence[Delete], at: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Per projection and aggregate: the partitions (by document id) the deletes touch."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for p in app.views:
        for doc_id, (key, _) in p.touched(deletes).items():
            out.setdefault(p.name, {})[doc_id] = dict(key)
    return out


def _holds(key: Mapping[str, Any], find: Callable[[str], bool]) -> bool:
    """True when a text value of ``key`` mentions the subject (``find``)."""
    return any(isinstance(v, str) and find(v) for v in key.values())


def _notification_entry(
    app: Any, deletes: Sequence[Delete], hashed: str, at: int, find: Any
) -> Callable[[int], list[Mutation]]:
    """The erasure's own entries, by ingestion time: the erased rows' keys (deleted at ``at``),
    except keys that hold the subject (a table keyed by it): those rows' entries say re-read
    (``max_keys`` 0), so no entry keeps the value."""
    from framework.notifications.entries import notification_mutations

    config = app.notifications
    timed = [Delete(d.table, d.key, at, d.columns) for d in deletes]
    spelled = [d for d in timed if any(isinstance(v, str) and find(v) for v in d.key.values())]
    listed = [d for d in timed if d not in spelled]

    def entries(ingested_at: int) -> list[Mutation]:
        out: list[Mutation] = []
        for suffix, part, max_keys in (("", listed, config.max_keys), (":reread", spelled, 0)):
            if part:
                out += notification_mutations(
                    app.name, f"{ERASURE_BATCH}{hashed[:24]}{suffix}", part, config.tenant_of, ingested_at,
                    max_keys, bucket_width=config.bucket_width, ttl=config.ttl,
                )  # fmt: skip
        return out

    return entries


async def erase(
    app: Any,
    subject: Subject,
    *,
    key: bytes,
    store: Any,
    index: Any | None = None,
    dlq_root: str | Path | None = None,
    dlq_objects: ObjectStore | None = None,
    exports: Sequence[str | Path] = (),
    dry_run: bool = False,
    clock: Any = time.time,
    aggregates: Any | None = None,
) -> ErasureReport:
    """Erase ``subject`` from ``app``'s data (see the module docstring); the report of what went.

    ``index`` None skips the documents (no projection is re-projected); ``aggregates`` (a
    ``framework.aggregates.contributions.ContributionIndex``) None skips the aggregates' contributions;
    ``dlq_root`` None skips the dead-letter WAL; ``dlq_objects`` is where its sealed segments
    were uploaded (``Settings.dlq_objects``), read and cleared too. ValueError when the app
    declares no personal data of the subject's kind.
    """
    started = time.monotonic()
    declared = declared_for(app, subject.kind)
    value = declared[0].norm(subject.value)
    hashed = subject_hash(key, subject.kind, value)
    at = int(clock() * 1_000_000)
    report = ErasureReport(app.name, subject.kind, hashed, dry_run, at)
    for schema in ERASURE_TABLES:
        await store.ensure_table(schema)
    found = await find_rows(store, app, subject)
    deletes = list(found.deletes.values())
    records = await find_records(store, app, subject)  # ID mutation's records of the subject's cells
    if records:
        report.rows[records[0].table] = len(records)
    report.scanned = found.scanned
    for d in deletes:
        counts = report.rows if d.columns is None else report.cells
        counts[d.table] = counts.get(d.table, 0) + 1
    touched = _marks(app, deletes, at)
    find = finder(*spellings(app, subject))
    keyed = {  # partitions whose key holds the subject: no mark, no contribution may keep it
        name: {doc_id: key for doc_id, key in keys.items() if _holds(key, find)}
        for name, keys in touched.items()
    }
    grouped = await find_groups(
        store, app, subject, {a.name: list(keyed.get(a.name, {})) for a in app.aggregates}
    )
    report.scanned += grouped.scanned
    for d in grouped.deletes.values():
        report.rows[d.table] = report.rows.get(d.table, 0) + 1
    if not dry_run:
        await store.apply([Upsert(DENYLIST_TABLE.name, {"app": app.name, "subject": hashed},
                                  {"kind": subject.kind, "erased_at": at}, at)])  # fmt: skip
        writes: list[Mutation] = [*deletes, *records, *grouped.deletes.values()]
        for p in mark_writers(app.views):
            name = p.version_table.name
            writes += [Upsert(name, k, {"version": at}, at) for k in touched.get(p.name, {}).values()]
        if app.notifications is not None and deletes:  # entries stamped when written (write_stamped)
            entries = _notification_entry(app, deletes, hashed, at, finder(*spellings(app, subject)))
            await write_stamped(store.apply, entries, clock, app.notifications.late_after, writes)
        elif writes:
            await store.apply(writes)
    if index is not None:
        from framework.runtime.projector import project_partition

        for p in app.projections:
            keys = touched.get(p.name, {})
            report.documents[p.name] = len(keys)
            if not dry_run:
                for k in keys.values():
                    await project_partition(store, index, p, k)
    if aggregates is not None:  # the entities' contributions again; their groups are announced
        from framework.runtime.projector import project_partition

        for a in app.aggregates:
            keys = touched.get(a.name, {})
            report.documents[a.name] = len(keys)
            if not dry_run:
                for k in keys.values():
                    await project_partition(store, aggregates, a, k)
                left = grouped.announce.get(a.name)
                if left:
                    await aggregates.announce(a, list(left))
    if not dry_run:  # after the re-projections, which read the marks
        unmarked = [Delete(p.version_table.name, k, MAX_VERSION) for p in mark_writers(app.views)
                    for k in keyed.get(p.name, {}).values()]  # fmt: skip
        if unmarked:
            await store.apply(unmarked)
    report.notifications = await _scrub_notifications(app, store, deletes, clock(), dry_run)
    spelled = spellings(app, subject)
    matches = record_finder(*spelled)
    event_ids = {str(d.key["event_id"]) for d in deletes if "event_id" in d.key}
    event_ids |= await _drop_parked(report, dlq_root, dlq_objects, matches, dry_run)
    if exports:
        from framework.dlq.erase import export_files, scrub_export

        for target in exports:
            for f in export_files(target):
                report.exports[str(f)] = scrub_export(f, matches, dry_run=dry_run)
    if app.delivery is not None:
        from framework.delivery.erase import erase_messages

        find = finder(*spelled)
        report.ledger = await erase_messages(
            store, app.delivery, lambda mid, src: mid in event_ids or find(mid) or find(src), dry_run=dry_run
        )
    report.seconds = time.monotonic() - started
    if not dry_run:
        audit_key = {"app": app.name, "erased_at": at, "erasure_id": uuid.uuid4().hex}
        counted = json.dumps(report.counts(), sort_keys=True)
        cells: dict[str, CellValue] = {"subject": hashed, "kind": subject.kind, "counts": counted}
        await store.apply([Upsert(AUDIT_TABLE.name, audit_key, cells, at)])
    return report


async def _scrub_notifications(app: Any, store: Any, deletes: Sequence[Delete], now: float, dry: bool) -> int:
    if app.notifications is None or not deletes:
        return 0
    from framework.notifications.erase import scrub_keys

    erased: dict[str, list[Any]] = {}
    for d in deletes:
        erased.setdefault(d.table, []).append(dict(d.key))
    return await scrub_keys(store, erased, now, skip_batch=lambda b: b.startswith(ERASURE_BATCH), dry_run=dry)


async def _drop_parked(
    report: ErasureReport, dlq_root: str | Path | None, objects: ObjectStore | None, matches: Any,
    dry_run: bool,
) -> set[str]:  # fmt: skip
    """Remove the subject's parked records, locally and in object storage; their event ids (whose
    ledger entries go too)."""
    import asyncio

    from framework.dlq.erase import drop_parked

    ids: set[str] = set()

    def seen(rec: Any) -> bool:
        hit = bool(matches(rec))
        if hit and rec.value is not None:
            try:
                event_id = json.loads(rec.value).get("event_id")
            except (ValueError, AttributeError):
                return hit
            if isinstance(event_id, str):
                ids.add(event_id)
        return hit

    dropped = await asyncio.to_thread(drop_parked, dlq_root, objects, seen, dry_run=dry_run)
    report.parked = dropped.records
    report.parked_held_open = dropped.held_open
    report.parked_damaged = len(dropped.damaged)
    return ids
