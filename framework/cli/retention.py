"""``converge retention``: run the retention job of an app (``run``, or ``run --dry-run``) and set a
tenant's override in the store's policy table (``set``)."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from framework.cli.common import (
    CliParser,
    app_declaring,
    app_flag,
    checkpoints_flag,
    index_flags,
    json_flag,
    open_existing_store,
    print_json,
    settings_of,
    store_flag,
    turn_flags,
)
from framework.cli.job_turn import job_turn

__all__ = ["register", "print_run"]


def print_run(run: Any) -> None:
    """A run's report as lines: per table what went, per domain what was re-projected or skipped."""
    verb = "would delete" if run.dry_run else "deleted"
    for name, r in run.tables.items():
        print(
            f"{name}: {r.rows} rows examined in {r.partitions} partitions, {verb} {r.rows_deleted} rows "
            f"and trimmed {r.rows_trimmed} ({r.cells_deleted} cells), {r.tombstones} tombstones, "
            f"{r.kept_forever} rows kept forever, {r.seconds:.2f}s"
        )
        for tenant, c in sorted(r.tenants.items()):
            print(
                f"  tenant {tenant}: {c['rows']} rows, {c['rows_deleted']} deleted, "
                f"{c['rows_trimmed']} trimmed"
            )
    for domain, counts in run.reprojected.items():
        print(f"{domain}: re-projected {counts['documents']} documents")
    for domain, reason in run.skipped.items():
        print(f"{domain}: not this job's turn: {reason}")


def _run(args: argparse.Namespace) -> int:
    from framework.retention.job import dry_run, ensure_tables

    app = app_declaring(args.app, "retention", "retention=RetentionPolicy(...)")
    settings = settings_of(args, app.name)

    async def go() -> Any:
        store = await open_existing_store(settings.wide_store)
        try:
            if args.dry_run:
                await ensure_tables(store, app)
                return await dry_run(store, app, now=args.now)
            return await _coordinated(args, app, settings, store)
        finally:
            await store.close()

    run = asyncio.run(go())
    if args.json:
        print_json(run.to_dict())
    else:
        print_run(run)
    return 0 if not run.skipped else 3


async def _coordinated(args: argparse.Namespace, app: Any, settings: Any, store: Any) -> Any:
    from framework.retention.job import run_retention

    async with job_turn(args, settings, app, store) as turn:
        return await run_retention(
            app, store, checkpoints=turn.checkpoints, locks=turn.locks, index=turn.index,
            predecessor=args.predecessor, start_with=args.start_with, clock=turn.clock,
        )  # fmt: skip


def _set(args: argparse.Namespace) -> int:
    from framework.retention.job import ensure_tables
    from framework.retention.policy import policy_row

    app = app_declaring(args.app, "retention", "retention=RetentionPolicy(...)")
    settings = settings_of(args, app.name)
    days = None if args.days == 0 else args.days
    row = policy_row(args.tenant, args.table, days, int(time.time() * 1_000_000))

    async def go() -> None:
        store = await open_existing_store(settings.wide_store)
        try:
            await ensure_tables(store, app)
            await store.apply([row])
        finally:
            await store.close()

    asyncio.run(go())
    print(f"tenant {args.tenant} keeps {args.table} {'forever' if days is None else f'{days} days'}")
    return 0


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge retention`` and its subcommands."""
    common = [app_flag("the converge App (with retention=...)"), store_flag(), index_flags()]
    top = sub.add_parser("retention", help="per-tenant retention: delete what is older than the policy")
    cmds = top.add_subparsers(dest="retention_command", metavar="SUBCOMMAND", required=True)
    run = cmds.add_parser(
        "run",
        help="one round of the retention job (every lock domain of the app)",
        description="Delete, per tenant and table, what is older than the app's retention policy: "
        "cutoff tombstones in the store, documents re-projected, notifications written. Exit 3 when "
        "a domain's turn was given up (another job holds it, or its predecessor has not run).",
        parents=[
            *common,
            checkpoints_flag(),
            turn_flags("retention"),
            json_flag("print the run's report as JSON"),
        ],
    )
    run.add_argument("--dry-run", action="store_true", help="report what would be deleted; write nothing")
    run.set_defaults(func=_run)
    setp = cmds.add_parser(
        "set", help="a tenant's retention of a table (or *) in the store's policy table", parents=common
    )
    setp.add_argument("--tenant", required=True)
    setp.add_argument("--table", required=True, help="a table name, or * for every table")
    setp.add_argument("--days", type=int, required=True, help="days to keep (0: forever)")
    setp.set_defaults(func=_set)
