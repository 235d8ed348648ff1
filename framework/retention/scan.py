"""The store side of a retention run: scan a table by partition, plan, and write each chunk.

Per chunk of partitions (``chunk`` partitions) one ``apply`` writes, together
(one transaction on SQLite): the partitions' cutoff tombstones, the tenant
records of partitions whose tenant cell expires (``framework.retention.tenants``),
the version marks of the projections that read the table (the higher of the
cutoff - 1 and one above the document's current version: a changed document
is never below the version indexed, and above it unless that is already
``MAX_VERSION``, where the mark stays; one read of the changed documents
per chunk), the notification entries of the rows that lost data (stamped when
written, again when the write was late: ``write_stamped``), and the partitions
the index must re-project (``converge_retention_pending``, read by the index
process, ``framework.jobs.reprojection``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.core.mutations import MAX_VERSION, CellValue, Delete, Mutation, Upsert
from framework.core.projection import Projection, mark_writers
from framework.core.rows import Row
from framework.jobs.reprojection import pending_row
from framework.notifications.config import NotificationConfig
from framework.notifications.entries import batch_id_of, fixed_tenant, key_ident, notification_mutations
from framework.notifications.stamping import write_stamped
from framework.retention.plan import Key, PartitionPlan, partition_key_of, plan_partition
from framework.retention.policy import PolicyOverrides, RetentionPolicy, default_tenant
from framework.retention.tenants import CellTenant, partition_tenant, recorded_tenants, tenant_record
from framework.runtime.projector import read_documents
from stores.base import WideColumnStore

__all__ = ["TableReport", "retain_table", "partitions"]


@dataclass
class TableReport:
    """What a run did (or, dry, would do) to one table."""

    table: str
    partitions: int = 0
    rows: int = 0
    cells: int = 0
    rows_deleted: int = 0
    rows_trimmed: int = 0
    cells_deleted: int = 0
    partitions_changed: int = 0
    tombstones: int = 0
    kept_forever: int = 0
    seconds: float = 0.0
    tenants: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "tenants": {t: dict(c) for t, c in self.tenants.items()}}

    def add(self, other: Mapping[str, Any]) -> None:
        """Add the counts of another shard's report (``to_dict`` form) of the same table."""
        for name, value in other.items():
            if name == "tenants":
                for tenant, counts in value.items():
                    mine = self.tenants.setdefault(tenant, {})
                    for k, n in counts.items():
                        mine[k] = mine.get(k, 0) + n
            elif name not in ("table", "seconds"):
                setattr(self, name, getattr(self, name) + value)


async def partitions(
    store: WideColumnStore, table: str, *, shard: int = 0, shards: int = 1
) -> AsyncIterator[list[Row]]:
    """The live rows of ``table``, one partition at a time (a scan returns a partition's rows together)."""
    schema = store.schema(table)
    current: list[Row] = []
    current_key: Mapping[str, CellValue] | None = None
    async for row in store.scan(table, shard=shard, shards=shards):
        pk = partition_key_of(schema, row.key)
        if current and pk != current_key:
            yield current
            current = []
        current_key = pk
        current.append(row)
    if current:
        yield current


def pending_rows(job: str, batch: int, version: int, projections: Sequence[Projection],
                 plans: Sequence[PartitionPlan]) -> list[Upsert]:  # fmt: skip
    """The pending re-projection rows of the partitions ``plans`` change."""
    out: list[Upsert] = []
    for p in projections:
        for plan in plans:
            if plan.schema.name not in p.source_names or not plan.changes:
                continue
            key = {c.name: plan.partition[c.name] for c in p.partition_key}
            out.append(pending_row(job, batch, p.name, p.document_id(key), key, version))
    return out


class _Tenants:
    """Resolves the tenant of each partition of a chunk: its owner's row (``tenant_from``), else
    the owner's tenant record, else its own rows, else its own record (one read each per chunk)."""

    def __init__(self, store: WideColumnStore, policy: RetentionPolicy, table: str) -> None:
        self.store, self.table, self.owner = store, table, policy.tenant_from.get(table)

    async def _recorded(self, table: str, found: list[str | None], keys: Sequence[Key]) -> None:
        missing = [i for i, t in enumerate(found) if t is None]
        for i, t in zip(missing, await recorded_tenants(self.store, table, [keys[i] for i in missing]),
                        strict=True):  # fmt: skip
            found[i] = t

    async def of(self, chunk: Sequence[list[Row]]) -> list[tuple[str, CellTenant | None]]:
        """Per partition: its tenant (``-`` when none is known) and the tenant its rows name."""
        own = [partition_tenant(rows) for rows in chunk]
        found: list[str | None] = [None] * len(chunk)
        if self.owner is not None:
            owner_schema = self.store.schema(self.owner)
            keys = [{c.name: rows[0].key[c.name] for c in owner_schema.partition_key} for rows in chunk]
            named = [partition_tenant([r]) if r is not None else None
                     for r in await self.store.read_rows(self.owner, keys)]  # fmt: skip
            found = [t[0] if t is not None else None for t in named]
            await self._recorded(self.owner, found, keys)
        found = [t if t is not None or o is None else o[0] for t, o in zip(found, own, strict=True)]
        schema = self.store.schema(self.table)
        await self._recorded(self.table, found, [partition_key_of(schema, rows[0].key) for rows in chunk])
        return [(default_tenant(t), o) for t, o in zip(found, own, strict=True)]


async def _marks(store: WideColumnStore, p: Projection, tombstones: Sequence[Delete]) -> list[Upsert]:
    """The version marks of ``p`` for the partitions the tombstones change: at the cutoff - 1, or
    above the document's current version when that is not below it (a changed document never
    keeps its version: a writer that remembers what it indexed at that version must not take the
    new content for the old).

    A document already at ``MAX_VERSION`` (a version events may carry) has no version above it:
    its mark is written at ``MAX_VERSION`` again and the document keeps its version. It still
    converges: the index takes a write at the version it holds (``external_gte``), and the
    stream's projector compares content as well as version (``framework.runtime.written``), so
    the re-projection of the changed document at the same version replaces the old one."""
    if not tombstones:
        return []
    touched = p.touched(tombstones)
    current = {doc_id: version for doc_id, _, version in
               await read_documents(store, p, [key for key, _ in touched.values()])}  # fmt: skip
    out = []
    for doc_id, (key, below) in touched.items():
        version = max(below, min(current.get(doc_id, 0) + 1, MAX_VERSION))
        out.append(Upsert(p.version_table.name, dict(key), {"version": version}, version))
    return out


def _records(table: str, plans: Sequence[tuple[CellTenant | None, PartitionPlan]]) -> list[Upsert]:
    """Tenant records of the changed partitions whose tenant cell the plan expires."""
    return [tenant_record(table, plan.partition, own[0], own[1]) for own, plan in plans
            if plan.changes and own is not None and own[1] is not None and own[1] < plan.cutoff]  # fmt: skip


async def retain_table(
    store: WideColumnStore,
    *,
    app_name: str,
    table: str,
    policy: RetentionPolicy,
    overrides: PolicyOverrides,
    now_us: int,
    projections: Sequence[Projection] = (),
    notifications: NotificationConfig | None = None,
    job: str = "retention",
    batch: int = 0,
    chunk: int = 1000,
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
    shard: int = 0,
    shards: int = 1,
) -> TableReport:
    """Scan ``table`` and write the retention of every partition at ``now_us`` (see the module
    docstring) in shard ``shard`` of ``shards``; ``dry_run`` writes nothing and reports what a
    run would do."""
    started = time.perf_counter()
    report = TableReport(table)
    schema = store.schema(table)
    tenants = _Tenants(store, policy, table)
    readers = [p for p in projections if table in p.source_names]
    notes = notifications or NotificationConfig()
    buffer: list[list[Row]] = []

    async def flush() -> None:
        plans: list[tuple[str, PartitionPlan]] = []
        named: list[tuple[CellTenant | None, PartitionPlan]] = []
        for (tenant, own), rows in zip(await tenants.of(buffer), buffer, strict=True):
            cutoff = policy.cutoff(tenant, table, now_us, overrides)
            counts = report.tenants.setdefault(tenant, {"rows": 0, "rows_deleted": 0, "rows_trimmed": 0})
            report.partitions += 1
            if cutoff is None:
                report.kept_forever += len(rows)
                report.rows += len(rows)
                counts["rows"] += len(rows)
                continue
            plan = plan_partition(schema, rows, cutoff)
            report.rows += plan.rows
            report.cells += plan.cells
            counts["rows"] += plan.rows
            counts["rows_deleted"] += len(plan.deleted)
            counts["rows_trimmed"] += len(plan.trimmed)
            plans.append((tenant, plan))
            named.append((own, plan))
        buffer.clear()
        sealed = [plan for _, plan in plans if plan.cutoff > 0 and (plan.changes or policy.seal)]
        changed = [plan for _, plan in plans if plan.changes]
        for _, plan in plans:
            report.rows_deleted += len(plan.deleted)
            report.rows_trimmed += len(plan.trimmed)
            report.cells_deleted += plan.expired_cells
            report.partitions_changed += int(plan.changes)
        report.tombstones += len(sealed)
        if dry_run or not sealed:
            return
        tombstones = {id(plan): plan.tombstone() for plan in sealed}
        writes: list[Mutation] = [t for t in tombstones.values() if t is not None]
        marked = [t for plan in changed if (t := tombstones[id(plan)]) is not None]
        for p in mark_writers(readers):
            writes += await _marks(store, p, marked)
        by_tenant: dict[str, list[Mutation]] = {}
        for tenant, plan in plans:
            if plan.changes:
                by_tenant.setdefault(tenant, []).extend(plan.announced())
        # one id per chunk: the partitions it changed (the same chunk gives the same id)
        batch_id = batch_id_of(f"{job}-{batch}", (f"{table}:{key_ident(plan.partition)}" for plan in changed))

        def entries(ingested_at: int) -> list[Mutation]:
            out: list[Mutation] = []
            for tenant, announced in sorted(by_tenant.items()):
                out += notification_mutations(
                    app_name, batch_id, announced, fixed_tenant(tenant),
                    ingested_at, notes.max_keys, bucket_width=notes.bucket_width, ttl=notes.ttl,
                )  # fmt: skip
            return out

        writes += pending_rows(job, batch, now_us, readers, changed)
        writes += _records(table, named)
        await write_stamped(store.apply, entries, clock, notes.late_after, writes)

    async for rows in partitions(store, table, shard=shard, shards=shards):
        buffer.append(rows)
        if len(buffer) >= chunk:
            await flush()
    if buffer:
        await flush()
    report.seconds = time.perf_counter() - started
    return report
