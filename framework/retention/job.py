"""The retention job: per lock domain one coordinated micro-batch with a store and an index process.

A domain is a table (``JobCoordinator`` lock domain = the table, job name
``retention``, predecessor configurable); a table whose tenant comes from
another (``RetentionPolicy.tenant_from``) is retained in its owner's domain,
before the owner, so its tenants are read while the owner's rows exist.

Each turn runs ``run_job`` on the job checkpoints ``retention.<domain>`` with
two processes: ``store`` (the tombstones, version marks, notifications and
pending re-projections, ``framework.retention.scan``) and ``index`` (re-project
the pending partitions). The batch's ``began_at``, recorded before any process
runs, is the retention's "now", so a repaired process computes the very same
cutoffs. A batch that failed in one process is repaired in that process only at
the next turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.aggregates.contributions import ContributionIndex
from framework.aggregates.targets import ViewTargets
from framework.coordination.checkpoints import CheckpointStore
from framework.coordination.locks import DomainLocks
from framework.core.aggregate import Aggregate
from framework.core.errors import ConvergeError
from framework.jobs.batches import Batch, BatchInput, JobCheckpoints
from framework.jobs.coordinator import CoordinatorSettings, JobCoordinator
from framework.jobs.micro_batch import JobProcess, run_job
from framework.jobs.reprojection import PENDING_TABLE, ReprojectionError, reproject_pending
from framework.notifications.schema import NOTIFICATION_TABLES
from framework.retention.bookkeeping import bookkeeping_tables
from framework.retention.policy import POLICY_TABLE, RetainingApp, RetentionPolicy, overrides_from_rows
from framework.retention.scan import TableReport, retain_table
from framework.retention.tenants import TENANT_TABLE
from stores.base import SearchIndex, WideColumnStore

__all__ = [
    "JOB",
    "RetentionError",
    "RetentionRun",
    "retained_tables",
    "domains",
    "ensure_tables",
    "dry_run",
    "run_retention",
    "retain_domain",
    "RetainDomain",
    "policy_of",
]

#: The job name every retention turn runs under.
JOB = "retention"


class RetentionError(ConvergeError, RuntimeError):
    """A retention run cannot go on (no policy, or no index for documents it must re-project)."""


@dataclass
class RetentionRun:
    """One run: per domain, the tables' reports, the batch id, or why its turn was given up."""

    now_us: dict[str, int] = field(default_factory=dict)
    tables: dict[str, TableReport] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    reprojected: dict[str, dict[str, int]] = field(default_factory=dict)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "now_us": self.now_us,
            "batches": self.batches,
            "skipped": self.skipped,
            "tables": {name: r.to_dict() for name, r in self.tables.items()},
            "reprojected": self.reprojected,
        }


def policy_of(app: RetainingApp) -> RetentionPolicy:
    """The app's declared ``RetentionPolicy``; RetentionError when it declares none."""
    policy = getattr(app, "retention", None)
    if policy is None:
        raise RetentionError(
            f"app {app.name} declares no retention (App(..., retention=RetentionPolicy(...)))"
        )
    return policy


def retained_tables(app: RetainingApp) -> list[str]:
    """The app's data tables retention may touch: every table but the framework's own
    (``framework.retention.bookkeeping``: deny-list, audit, notifications, version marks, ...)."""
    own = bookkeeping_tables(app)
    return [t.name for t in app.tables if t.name not in own]


def domains(app: RetainingApp, policy: RetentionPolicy) -> dict[str, list[str]]:
    """Lock domain -> its tables in run order (tables taking their tenant from the domain's table
    first, the domain's own table last)."""
    names = retained_tables(app)
    named = set(policy.per_table) | {t for tables in policy.per_tenant.values() for t in tables} - {"*"}
    unknown = sorted(named - set(names))
    if unknown:
        raise RetentionError(f"the retention policy names {unknown}: not data tables of app {app.name}")
    out: dict[str, list[str]] = {}
    for table in names:
        owner = policy.tenant_from.get(table, table)
        if owner not in names:
            raise RetentionError(f"tenant_from: {table} names {owner}, not a table of app {app.name}")
        out.setdefault(owner, [])
        if table != owner:
            out[owner].append(table)
    for owner, tables in out.items():
        tables.append(owner)
    return out


async def ensure_tables(store: WideColumnStore, app: RetainingApp) -> None:
    """Create the app's tables and the ones retention writes (policy, pending, tenants, notifications)."""
    for schema in (*app.tables, POLICY_TABLE, PENDING_TABLE, TENANT_TABLE, *NOTIFICATION_TABLES):
        await store.ensure_table(schema)


async def _overrides(store: WideColumnStore, policy: RetentionPolicy) -> dict[tuple[str, str], int | None]:
    if not policy.use_policy_table:
        return {}
    return overrides_from_rows([row async for row in store.scan(POLICY_TABLE.name)])


#: ``retain(tables, now_us, batch, job)``: the store process of one domain's batch (the tables'
#: reports); the Spark job (``spark_batch.retention``) runs it on executors.
RetainDomain = Callable[[Sequence[str], int, int, str], Awaitable[list[TableReport]]]


async def retain_domain(
    store: WideColumnStore,
    app: RetainingApp,
    tables: Sequence[str],
    now_us: int,
    *,
    batch: int,
    job: str,
    dry: bool = False,
    chunk: int = 1000,
    clock: Callable[[], float] = time.time,
    shard: int = 0,
    shards: int = 1,
) -> list[TableReport]:
    """The store side of one domain's batch at ``now_us`` (shard ``shard`` of ``shards`` of each
    table's partitions), table after table in ``tables``' order."""
    policy = policy_of(app)
    overrides = await _overrides(store, policy)
    reports = []
    for table in tables:
        if not policy.may_expire(table, overrides):
            reports.append(TableReport(table))
            continue
        reports.append(
            await retain_table(
                store,
                app_name=app.name,
                table=table,
                policy=policy,
                overrides=overrides,
                now_us=now_us,
                projections=app.views,
                notifications=app.notifications,
                job=job,
                batch=batch,
                chunk=chunk,
                dry_run=dry,
                clock=clock,
                shard=shard,
                shards=shards,
            )
        )
    return reports


async def dry_run(
    store: WideColumnStore, app: RetainingApp, *, now: float | None = None, chunk: int = 1000
) -> RetentionRun:
    """What a run at ``now`` (default: the clock) would delete; writes nothing."""
    now_us = int((time.time() if now is None else now) * 1_000_000)
    run = RetentionRun(dry_run=True)
    for domain, tables in domains(app, policy_of(app)).items():
        run.now_us[domain] = now_us
        for r in await retain_domain(
            store, app, tables, now_us, batch=0, job=JOB, dry=True, chunk=chunk, clock=time.time
        ):
            run.tables[r.table] = r
    return run


async def run_retention(
    app: RetainingApp,
    store: WideColumnStore,
    *,
    checkpoints: CheckpointStore,
    locks: DomainLocks,
    index: SearchIndex | None = None,
    aggregates: ContributionIndex | None = None,
    predecessor: str | None = None,
    start_with: str | None = None,
    holder: str | None = None,
    clock: Callable[[], float] = time.time,
    chunk: int = 1000,
    only: Sequence[str] | None = None,
    retain: RetainDomain | None = None,
) -> RetentionRun:
    """One round of the retention job in every domain of ``app`` (or the ``only`` domains): take
    the domain's turn after ``predecessor`` (None: unordered), repair the domain's lagging batch,
    run one new batch at the clock's now, commit. A domain whose turn is given up is reported in
    ``skipped`` and retried next round. ``retain`` replaces the store process's work (default:
    ``retain_domain`` here, in this process).

    Documents are re-projected into ``index``, an aggregate's into its contributions:
    ``aggregates`` (a ``ContributionIndex``, e.g. a test kit ``Driver``'s ``d.aggregates``), or an
    ``index`` that routes them itself (``ViewTargets``, as ``converge retention run`` passes).
    RetentionError before any work when the app has aggregates and neither is given."""
    policy = policy_of(app)
    index = _targets(app, index, aggregates)
    await ensure_tables(store, app)
    run = RetentionRun()
    for domain, tables in domains(app, policy).items():
        if only is not None and domain not in only:
            continue
        job = f"{JOB}.{domain}"
        settings = CoordinatorSettings(domain, JOB, predecessor, start_with=start_with, holder=holder)
        coordinator = JobCoordinator(locks, settings, checkpoints=checkpoints)
        async with coordinator.turn() as turn:
            if not turn:
                run.skipped[domain] = turn.reason
                continue

            async def store_process(
                batch: Batch, tables: Sequence[str] = tables, job: str = job
            ) -> dict[str, Any]:
                if retain is not None:
                    reports = await retain(tables, batch.began_at, batch.batch_id, job)
                else:
                    reports = await retain_domain(
                        store,
                        app,
                        tables,
                        batch.began_at,
                        batch=batch.batch_id,
                        job=job,
                        chunk=chunk,
                        clock=clock,
                    )
                for r in reports:
                    run.tables[r.table] = r
                return {
                    r.table: {"rows_deleted": r.rows_deleted, "rows_trimmed": r.rows_trimmed} for r in reports
                }

            async def index_process(batch: Batch, job: str = job, domain: str = domain) -> dict[str, Any]:
                try:
                    counts = await reproject_pending(store, index, app.views, job, batch.batch_id)
                except ReprojectionError as exc:
                    raise RetentionError(str(exc)) from exc
                run.reprojected[domain] = counts
                return counts

            async def plan(previous: Batch | None, tables: Sequence[str] = tables) -> BatchInput:
                return BatchInput(files=tuple(f"table:{t}" for t in tables))

            jc = JobCheckpoints(checkpoints, job, ["store", "index"])
            done = await run_job(
                jc,
                [JobProcess("store", store_process), JobProcess("index", index_process)],
                plan,
                max_batches=1,
                clock=clock,
            )
            batch_id = done.batches[-1] if done.batches else max(done.repaired, default=0)
            state = (await jc.state()).batch
            run.batches[domain] = batch_id
            if state is not None:
                run.now_us[domain] = state.began_at
                turn.commit(json.dumps({"batch_id": state.batch_id, "now_us": state.began_at}))
    return run


def _targets(
    app: RetainingApp, index: SearchIndex | None, aggregates: ContributionIndex | None
) -> SearchIndex | None:
    """Where re-projected documents go: an aggregate's alias to its contributions, the others to
    ``index``; RetentionError naming the aggregates nothing would take."""
    if aggregates is not None:
        return ViewTargets(index, aggregates)
    routed = index.contributions.aggregates if isinstance(index, ViewTargets) else {}
    missing = [v.name for v in app.views if isinstance(v, Aggregate) and v.alias not in routed]
    if missing:
        raise RetentionError(
            f"the app's aggregates {missing} are re-projected into their contributions, not the index:"
            " give aggregates= (a ContributionIndex, e.g. a test kit Driver's d.aggregates)"
        )
    return index
