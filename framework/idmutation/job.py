"""The ID mutation job: a coordinated micro-batch over the app's owner tables.

A turn takes the lock of every owner table (``JobCoordinator`` lock domain =
the table, job name ``id_mutation``, predecessor configurable; domains in
name order, all or none), then runs two jobs on the job checkpoints:

- ``id_mutation.<app>`` with the processes ``requests`` (new offsets of the
  requests topic, recorded in the batch; malformed requests parked),
  ``map`` (re-collapse the touched tenants, write and publish the changed
  entries), ``apply`` (move the cells) and ``index`` (re-project the
  partitions the moves changed); one batch, or batches until the topic is
  drained (``until_idle``). See ``framework.idmutation.steps``.
- ``id_mutation.<app>.sweep`` with ``sweep`` and ``index``: the partitions of
  owner tables that notifications written since the sweep's checkpoint name
  (a worker that had not seen the map wrote under an old id) and whose id has
  intervals are applied again, and the recorded cells of the origins that
  entries of ``converge_id_routes`` name are routed again (a worker resolved
  them with an older map). Entries this job wrote (batch ids
  ``id_mutation...``) are skipped; an entry that says re-read sweeps every
  mapped id of its tenant.

A process that fails leaves its batch to be repaired in that process alone at
the next turn.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.locks import DomainLocks
from framework.idmutation.apply import ApplyReport, sweep
from framework.idmutation.collapse import Interval
from framework.idmutation.declare import IdMutation, MutatingApp
from framework.idmutation.routes import ROUTES_TABLE
from framework.idmutation.steps import (
    Applier,
    Collapser,
    IdMutationError,
    Screen,
    StepContext,
    apply_changes,
    check_screen,
    erased_verdict,
    remap,
    store_requests,
    writes_extra,
)
from framework.idmutation.tables import ID_TABLES, MAP_TABLE, REQUESTS_TABLE, decode_intervals, request_of_row
from framework.idmutation.topic import KafkaLog
from framework.jobs.batches import Batch, BatchInput, JobCheckpoints
from framework.jobs.coordinator import CoordinatorSettings, JobCoordinator
from framework.jobs.kafka_ranges import plan_ranges
from framework.jobs.micro_batch import JobProcess, run_job
from framework.jobs.reprojection import PENDING_TABLE, reproject_pending
from framework.notifications.reader import DEFAULT_SETTLE, NotificationReader
from framework.notifications.schema import NOTIFICATION_TABLES
from stores.base import SearchIndex, WideColumnStore

if TYPE_CHECKING:
    from framework.dlq import DeadLetterWAL

__all__ = ["JOB", "IdMapRun", "IdMutationError", "config_of", "ensure_tables", "run_id_mutation", "status"]

logger = logging.getLogger("framework.idmutation")

#: The job name every ID mutation turn runs under (and the prefix of its notification batch ids).
JOB = "id_mutation"


@dataclass
class IdMapRun:
    """One turn: per batch the processes' reports, the sweep's, or why the turn was given up."""

    batches: list[int] = field(default_factory=list)
    repaired: dict[int, list[str]] = field(default_factory=dict)
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    sweep: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    moved: ApplyReport = field(default_factory=ApplyReport)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "repaired": {str(k): v for k, v in self.repaired.items()},
            "reports": {str(k): v for k, v in self.reports.items()},
            "sweep": self.sweep,
            "skipped": self.skipped,
            "moved": self.moved.to_dict(),
        }


def config_of(app: MutatingApp) -> IdMutation:
    """The app's ``IdMutation``; IdMutationError when it declares none."""
    config = getattr(app, "id_mutation", None)
    if config is None:
        raise IdMutationError(
            f"app {app.name} declares no id_mutation (App(..., id_mutation=IdMutation(...)))"
        )
    return config


async def ensure_tables(store: WideColumnStore, app: MutatingApp) -> None:
    """The app's tables and the ones the job writes."""
    for schema in (*app.tables, *ID_TABLES, PENDING_TABLE, *NOTIFICATION_TABLES):
        await store.ensure_table(schema)


def _name(app: MutatingApp) -> str:
    return f"{JOB}.{app.name}"


async def _lookup(
    store: WideColumnStore, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[Interval]]:
    rows = await store.read_rows(MAP_TABLE.name, [{"tenant": t, "id": i} for t, i in pairs])
    return {p: decode_intervals(str(r.values()["intervals"])) for p, r in zip(pairs, rows, strict=True)
            if r is not None and r.values().get("intervals")}  # fmt: skip


async def _sweep_process(
    ctx: StepContext, reader: NotificationReader, job: str, batch: Batch
) -> dict[str, Any]:
    owners = {c.table for c in ctx.config.columns} | {ROUTES_TABLE.name}  # records a worker wrote
    keys: list[tuple[str, Any]] = []
    reread: set[str] = set()
    entries, after = 0, None
    while True:
        page = await reader.read(1000, after=after)
        if not page:
            break
        after = page[-1].position
        for e in page:
            if e.batch_id.startswith(JOB) or e.table not in owners:
                continue
            entries += 1
            if e.keys is None:
                reread.add(e.tenant)
            else:
                keys += [(e.table, k) for k in e.keys]
    for tenant in sorted(reread):
        rows = await ctx.store.read_partition(REQUESTS_TABLE.name, {"tenant": tenant})
        ids = {r.old_id for r in map(request_of_row, rows)}
        for c in ctx.config.columns:
            keys += [(c.table, {c.tenant_column: tenant, c.id_column: i}) for i in ids]
        keys += [(ROUTES_TABLE.name, {"tenant": tenant, "origin": i}) for i in ids]
    report = await sweep(ctx.store, ctx.config, lambda pairs: _lookup(ctx.store, pairs), keys,
                         chunk=ctx.chunk, clock=ctx.clock, extra=writes_extra(ctx, job, batch),
                         erased=await erased_verdict(ctx))  # fmt: skip
    if after is not None:
        await reader.commit_position(after, reader.seen)
    return {"entries": entries, "reread_tenants": len(reread), **report.to_dict()}


async def run_id_mutation(
    app: MutatingApp,
    store: WideColumnStore,
    *,
    checkpoints: CheckpointStore,
    locks: DomainLocks,
    log: KafkaLog | None,
    index: SearchIndex | None = None,
    dlq: DeadLetterWAL | None = None,
    predecessor: str | None = None,
    start_with: str | None = None,
    holder: str | None = None,
    until_idle: bool = False,
    max_offsets: int | None = None,
    settle: float = DEFAULT_SETTLE,
    clock: Callable[[], float] = time.time,
    chunk: int = 500,
    collapser: Collapser | None = None,
    applier: Applier | None = None,
    screen: Screen | None = None,
) -> IdMapRun:
    """One turn of the job (see the module docstring); ``log`` None runs the sweep only.
    ``collapser`` and ``applier`` replace the collapse and the moves (the Spark job's); ``screen``
    is the erasure screen's verdict (``framework.erasure.screen_verdict``), required when the app
    declares personal data: erased subjects' records are not routed."""
    config = config_of(app)
    check_screen(app, screen)
    await ensure_tables(store, app)
    ctx = StepContext(app, config, store, log, dlq, clock, chunk, collapser, applier, screen)
    run = IdMapRun()
    if app.projections and index is None:
        raise IdMutationError("the app has projections: give the index their documents are re-projected into")
    async with contextlib.AsyncExitStack() as stack:
        turns = []
        for domain in sorted({c.table for c in config.columns}):
            settings = CoordinatorSettings(domain, JOB, predecessor, start_with=start_with, holder=holder)
            turn = await stack.enter_async_context(
                JobCoordinator(locks, settings, checkpoints=checkpoints).turn()
            )
            if not turn:
                run.skipped[domain] = turn.reason
                return run
            turns.append(turn)
        name = _name(app)

        async def index_process(batch: Batch, job: str = name) -> dict[str, Any]:
            return await reproject_pending(store, index, app.views, job, batch.batch_id)

        if log is not None:
            topic = config.requests_topic

            async def plan(previous: Batch | None) -> BatchInput | None:
                return plan_ranges(None if previous is None else previous.input, await log.bounds([topic]),
                                   max_offsets)  # fmt: skip

            async def apply_process(batch: Batch) -> dict[str, Any]:
                report = await apply_changes(ctx, name, batch)
                run.moved.add(report)
                if report.unconverged:
                    logger.warning("%s batch %d: %d recorded cells cannot reach their final id "
                                   "(docs/how-to/id-mutation.md: requests learnt late)", name, batch.batch_id,
                                   report.unconverged)  # fmt: skip
                return report.to_dict()

            processes = [
                JobProcess("requests", lambda b: store_requests(ctx, name, b)),
                JobProcess("map", lambda b: remap(ctx, name, b)),
                JobProcess("apply", apply_process),
                JobProcess("index", index_process),
            ]
            jc = JobCheckpoints(checkpoints, name, [p.name for p in processes])
            done = await run_job(jc, processes, plan, max_batches=None if until_idle else 1, clock=clock)
            run.batches, run.repaired = done.batches, done.repaired
            run.reports = done.reports
        sweep_name = f"{name}.sweep"
        reader = NotificationReader(store, checkpoints, sweep_name, settle=settle, clock=clock)

        async def sweep_plan(previous: Batch | None) -> BatchInput | None:
            return BatchInput(files=("notifications",)) if await reader.read(1) else None

        async def sweep_process(batch: Batch) -> dict[str, Any]:
            return await _sweep_process(ctx, reader, sweep_name, batch)

        sweep_jc = JobCheckpoints(checkpoints, sweep_name, ["sweep", "index"])
        swept = await run_job(
            sweep_jc,
            [
                JobProcess("sweep", sweep_process),
                JobProcess("index", lambda b: index_process(b, sweep_name)),
            ],  # fmt: skip
            sweep_plan,
            max_batches=1,
            clock=clock,
        )
        run.sweep = {str(k): v for k, v in swept.reports.items()}
        final = json.dumps({"batches": run.batches, "sweep": swept.batches})
        for turn in turns:
            turn.commit(final)
    return run


async def status(store: WideColumnStore, app: MutatingApp, checkpoints: CheckpointStore) -> dict[str, Any]:
    """The job checkpoints of the app's ID mutation (main and sweep) and the size of its tables."""
    name = _name(app)
    out: dict[str, Any] = {}
    jc = JobCheckpoints(checkpoints, name, ["requests", "map", "apply", "index"])
    out["job"] = (await jc.state()).to_dict()
    sj = JobCheckpoints(checkpoints, f"{name}.sweep", ["sweep", "index"])
    out["sweep"] = (await sj.state()).to_dict()
    counts = {}
    for table in (REQUESTS_TABLE.name, MAP_TABLE.name):
        n = 0
        async for _ in store.scan(table):
            n += 1
        counts[table] = n
    out["rows"] = counts
    return out
