"""The steps of one ID mutation batch (``framework.idmutation.job`` runs them as processes).

- ``store_requests``: parse the batch's records; park malformed ones in the dead-letter WAL
  (with the reason; a re-run parks them again: at least once); store the accepted ones and the
  tenants they touch.
- ``remap``: re-collapse every touched tenant from its stored history, record the entries that
  changed, then write them to the map table, then publish them to the map topic (``id.mapped``
  events of ``framework.idmutation.resolution``, version = the batch's ``began_at``: monotone
  across batches, also after a reset of the job checkpoints).
- ``apply_changes``: move the cells of the changed entries (``apply_id_map``), with the
  notification entries of the rows changed and the partitions to re-project.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.core.errors import ConvergeError
from framework.core.mutations import CellValue, Mutation
from framework.core.projection import mark_writers
from framework.core.schema import SchemaError, TableSchema
from framework.dlq.record import ParkedRecord
from framework.idmutation.apply import Apply, ApplyReport, ExtraWrites, apply_id_map, id_value
from framework.idmutation.collapse import Interval, collapse, components
from framework.idmutation.declare import IdMutation, MutatingApp, map_topic_of
from framework.idmutation.requests import IdRequest, IdRequestError, parse_request
from framework.idmutation.resolution import mapped_event
from framework.idmutation.routes import Verdict
from framework.idmutation.tables import (
    BATCH_TABLE,
    BUCKETS,
    MAP_TABLE,
    REQUESTS_TABLE,
    batch_row,
    decode_intervals,
    encode_intervals,
    map_row,
    request_of_row,
    request_row,
)
from framework.idmutation.topic import KafkaLog
from framework.jobs.batches import Batch
from framework.jobs.reprojection import pending_row
from framework.notifications.config import NotificationConfig
from framework.notifications.entries import batch_id_of, fixed_tenant, notification_mutations
from framework.notifications.stamping import write_stamped
from stores.base import WideColumnStore

if TYPE_CHECKING:
    from framework.dlq import DeadLetterWAL

__all__ = [
    "IdMutationError",
    "Applier",
    "Collapser",
    "Screen",
    "StepContext",
    "check_ids",
    "check_screen",
    "erased_verdict",
    "store_requests",
    "remap",
    "apply_changes",
    "work_list",
    "writes_extra",
]

#: ``collapser(requests)``: per ``(tenant, id)`` its intervals (default ``collapse``).
Collapser = Callable[[Sequence[IdRequest]], Mapping[tuple[str, str], Sequence[Interval]]]
#: ``applier(job, batch, collapsed)``: the moves of a batch's changed entries (default ``apply_id_map``
#: here, in this process; the Spark job spreads them over tasks).
Applier = Callable[[str, Batch, Mapping[tuple[str, str], Sequence[Interval]]], Awaitable[ApplyReport]]
#: ``screen(store, app)``: the erasure screen's verdict of the app's deny-list now (None: nobody
#: erased), so that an erased subject's recorded cells are not routed again. The caller that wires
#: both features gives it (``framework.erasure.screen_verdict``): the erasure stands above ID mutation.
Screen = Callable[[WideColumnStore, MutatingApp], Awaitable[Verdict | None]]
_WRITE_CHUNK = 2000


class IdMutationError(ConvergeError, RuntimeError):
    """The ID mutation job cannot go on (nowhere to park a bad request, no index to re-project)."""


@dataclass
class StepContext:
    """What the steps share: the app, its store, the Kafka log, where to park, the clock."""

    app: MutatingApp
    config: IdMutation
    store: WideColumnStore
    log: KafkaLog | None
    dlq: DeadLetterWAL | None = None
    clock: Callable[[], float] = time.time
    chunk: int = 500
    collapser: Collapser | None = None
    applier: Applier | None = None
    screen: Screen | None = None


def check_screen(app: MutatingApp, screen: Screen | None) -> None:
    """IdMutationError when ``app`` declares personal data but no ``screen`` is given: its erased
    subjects' recorded cells would be routed back."""
    declared: object = getattr(app, "personal_data", ())
    if screen is None and declared:
        raise IdMutationError(
            f"app {app.name} declares personal data: give the erasure screen "
            "(framework.erasure.screen_verdict) so that erased subjects' records are not routed"
        )


async def erased_verdict(ctx: StepContext) -> Verdict | None:
    """The erasure screen's verdict now (``ctx.screen``; None: nobody erased), see ``check_screen``."""
    check_screen(ctx.app, ctx.screen)
    return None if ctx.screen is None else await ctx.screen(ctx.store, ctx.app)


async def _apply_chunked(store: WideColumnStore, writes: Sequence[Mutation]) -> None:
    for start in range(0, len(writes), _WRITE_CHUNK):
        await store.apply(writes[start : start + _WRITE_CHUNK])


async def work_list(store: WideColumnStore, job: str, batch: int, kind: str) -> list[tuple[str, str, str]]:
    """``(tenant, id, intervals JSON)`` of a batch's work list of ``kind``."""
    keys: list[dict[str, CellValue]] = [
        {"job": job, "batch": batch, "kind": kind, "bucket": b} for b in range(BUCKETS)
    ]
    out = []
    for rows in await store.read_partitions(BATCH_TABLE.name, keys):
        out += [
            (str(r.key["tenant"]), str(r.key["id"]), str(r.values().get("intervals") or "")) for r in rows
        ]
    return sorted(out)


def check_ids(request: IdRequest, schemas: Sequence[tuple[TableSchema, str]]) -> IdRequest:
    """``request`` if its ids fit every owner table's id column (an integer column takes integer
    ids only), else IdRequestError: a request the moves could never apply is parked up front."""
    for schema, column in schemas:
        for ident in (request.old_id, request.new_id):
            if ident is None:
                continue
            try:
                id_value(schema, column, ident)
            except SchemaError as exc:
                raise IdRequestError(f"id request {request.request_id!r}: {exc}") from None
    return request


async def store_requests(ctx: StepContext, job: str, batch: Batch) -> dict[str, Any]:
    """Read the batch's offsets, park the malformed requests, store the rest (see the module doc)."""
    if ctx.log is None:
        raise IdMutationError("no Kafka log to read the requests from")
    records = await ctx.log.read_all(batch.input.ranges)
    accepted: list[IdRequest] = []
    bad: list[tuple[str, int, int, bytes | None, bytes | None, str]] = []
    schemas = [(ctx.store.schema(c.table), c.id_column) for c in ctx.config.columns]
    for topic, (partition, offset, key, value) in records:
        try:
            if value is None:
                raise IdRequestError("id request: empty record")
            accepted.append(check_ids(parse_request(value), schemas))
        except IdRequestError as exc:
            bad.append((topic, partition, offset, key, value, str(exc)))
    if bad:
        if ctx.dlq is None:
            raise IdMutationError(f"{len(bad)} malformed id requests and no dead-letter WAL to park them in")
        for topic, partition, offset, key, value, reason in bad:
            await ctx.dlq.park(ParkedRecord(
                pipeline=f"{job}:requests", topic=topic, partition=partition, offset=offset, key=key,
                value=value, stage="parse", error_class="IdRequestError", error=reason,
                parked_at=ctx.clock(), event_type="id.request",
            ))  # fmt: skip
    writes: list[Mutation] = [request_row(r) for r in accepted]
    writes += [
        batch_row(job, batch.batch_id, "tenant", t, "", batch.began_at) for t in {r.tenant for r in accepted}
    ]
    await _apply_chunked(ctx.store, writes)
    return {"records": len(records), "accepted": len(accepted), "parked": len(bad)}


def _collapse(
    ctx: StepContext, requests: Sequence[IdRequest]
) -> Mapping[tuple[str, str], Sequence[Interval]]:
    if ctx.collapser is not None:
        return ctx.collapser(requests)
    return collapse(requests, group=components)


async def remap(ctx: StepContext, job: str, batch: Batch, *, tenants_per_read: int = 200) -> dict[str, Any]:
    """Re-collapse the batch's tenants, record and write the changed entries, publish them."""
    tenants = sorted({t for t, _, _ in await work_list(ctx.store, job, batch.batch_id, "tenant")})
    version = batch.began_at
    changed = entries = 0
    for start in range(0, len(tenants), tenants_per_read):
        part = tenants[start : start + tenants_per_read]
        found = await ctx.store.read_partitions(REQUESTS_TABLE.name, [{"tenant": t} for t in part])
        history = [request_of_row(row) for rows in found for row in rows]
        mapped = _collapse(ctx, history)
        pairs = sorted(mapped)
        entries += len(pairs)
        old = await ctx.store.read_rows(MAP_TABLE.name, [{"tenant": t, "id": i} for t, i in pairs])
        news = []
        for (tenant, ident), row in zip(pairs, old, strict=True):
            text = encode_intervals(mapped[(tenant, ident)])
            if row is None or row.values().get("intervals") != text:
                news.append((tenant, ident, mapped[(tenant, ident)]))
        changed += len(news)
        # the work list first: a re-run after a crash between the two finds it complete
        await _apply_chunked(ctx.store, [batch_row(job, batch.batch_id, "change", t, i, version, iv)
                                         for t, i, iv in news])  # fmt: skip
        await _apply_chunked(ctx.store, [map_row(t, i, iv, batch.batch_id, version) for t, i, iv in news])
    published = 0
    if ctx.log is not None:
        work = await work_list(ctx.store, job, batch.batch_id, "change")
        events = (mapped_event(t, i, decode_intervals(iv), version) for t, i, iv in work)
        published = await ctx.log.publish(
            map_topic_of(ctx.app.name), ((e.ordering_key.encode(), e.to_json()) for e in events)
        )
    return {"tenants": len(tenants), "entries": entries, "changed": changed, "published": published}


def writes_extra(ctx: StepContext, job: str, batch: Batch) -> ExtraWrites:
    """What a chunk of moves is applied with: version marks of the projections reading the moved
    tables, pending re-projections, and notification entries of the rows changed, stamped when
    written (``framework.notifications.stamping.write_stamped``: written again when late)."""
    notes = ctx.app.notifications or NotificationConfig()
    projections = ctx.app.views
    writers = mark_writers(projections)
    tenant_of = {c.table: c.tenant_column for c in ctx.config.columns}
    cols = {c.table: (c.tenant_column, c.id_column) for c in ctx.config.columns}

    def marks(moves: Sequence[Mutation]) -> list[Mutation]:
        out: list[Mutation] = []
        for p in projections:
            mine = [m for m in moves if m.table in p.source_names]
            if not mine:
                continue
            if p in writers:
                out += p.version_marks(mine)
            for doc_id, (key, _) in p.touched(mine).items():
                out.append(pending_row(job, batch.batch_id, p.name, doc_id, key, batch.began_at))
        return out

    def entries(moves: Sequence[Mutation]) -> Callable[[int], list[Mutation]]:
        by_tenant: dict[str, list[Mutation]] = {}
        for m in moves:
            by_tenant.setdefault(str(m.key[tenant_of[m.table]]), []).append(m)
        # one id per chunk: a digest of the partitions it moved (the same chunk gives the same id)
        partitions = {(m.table, str(m.key[cols[m.table][0]]), str(m.key[cols[m.table][1]])) for m in moves}
        batch_id = batch_id_of(f"{job}-{batch.batch_id}", ("\x00".join(p) for p in partitions))

        def at(ingested_at: int) -> list[Mutation]:
            out: list[Mutation] = []
            for tenant, mine in sorted(by_tenant.items()):
                out += notification_mutations(
                    ctx.app.name, batch_id, mine, fixed_tenant(tenant), ingested_at,
                    notes.max_keys, bucket_width=notes.bucket_width, ttl=notes.ttl,
                )  # fmt: skip
            return out

        return at

    async def extra(apply: Apply, writes: Sequence[Mutation], moves: Sequence[Mutation]) -> None:
        await write_stamped(apply, entries(moves), ctx.clock, notes.late_after, [*writes, *marks(moves)])

    return extra


async def apply_changes(ctx: StepContext, job: str, batch: Batch) -> ApplyReport:
    """Move the cells of the batch's changed entries (with notifications and re-projections)."""
    work = await work_list(ctx.store, job, batch.batch_id, "change")
    collapsed = {(t, i): decode_intervals(iv) for t, i, iv in work}
    if ctx.applier is not None:
        return await ctx.applier(job, batch, collapsed)
    return await apply_id_map(
        ctx.store,
        ctx.config,
        collapsed,
        chunk=ctx.chunk,
        clock=ctx.clock,
        extra=writes_extra(ctx, job, batch),
        erased=await erased_verdict(ctx),  # erased subjects' records are not routed
    )
