"""``converge spark changes``: export the current rows of what changed since a consumer's
checkpoint to Parquet (``spark_batch.changes``), then commit the checkpoint."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from framework.cli.common import checkpoints_flag, checkpoints_url

__all__ = ["add_changes"]

#: Exit status when the consumer fell behind the notification retention (as ``converge changes read``).
GAP_STATUS = 3


def _checkpoints(args: argparse.Namespace, store: str) -> str:
    return checkpoints_url(store, args.checkpoints)


def _session(args: argparse.Namespace) -> Any:
    import logging

    from spark_batch.session import spark_session

    if not logging.getLogger().handlers:
        level = logging.WARNING if args.quiet else logging.INFO
        logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark_session("converge-changes", args.master)


def _changes(args: argparse.Namespace) -> int:
    from framework.notifications import NOTIFICATION_TABLES, NotificationGap
    from spark_batch.changes import export_changes
    from spark_batch.preflight import Job
    from spark_batch.report import write_json

    job = Job(args, need_projection=False)
    own = {t.name for t in NOTIFICATION_TABLES}
    schemas = {t.name: t for t in job.app.tables if t.name not in own}
    if args.table:
        unknown = sorted(set(args.table) - set(schemas))
        if unknown:
            from spark_batch.apps import JobError

            raise JobError(f"--table: {unknown} not tables of app {job.app.name} ({sorted(schemas)})")
        schemas = {t: schemas[t] for t in args.table}
    tenant_of = job.app.notifications.tenant_of if job.app.notifications is not None else None
    checkpoints = _checkpoints(args, job.store)
    spark = _session(args)
    try:
        report = export_changes(
            spark, job.store, checkpoints, args.consumer, args.out, schemas, tenant_of=tenant_of,
            commit=not args.no_commit, partitions=args.partitions, retention=int(args.retention),
            settle=args.settle, start=args.start,
        )  # fmt: skip
    except NotificationGap as exc:
        print(f"converge spark changes: error: {exc}", file=sys.stderr)
        return GAP_STATUS
    state = (
        "committed" if report.committed is not None else "not committed" if report.entries else "nothing new"
    )
    print(f"consumer {args.consumer}: {report.entries} entries, {state}")
    for table, n in sorted(report.rows.items()):
        reread = report.reread.get(table)
        extra = f" (re-read tenants: {', '.join(reread)})" if reread else ""
        print(f"  {table}: {n} rows -> {os.path.join(str(args.out), table)}{extra}")
    if args.report:
        write_json(args.report, report.to_dict())
    return 0


def add_changes(
    cmds: argparse._SubParsersAction[Any],
    common: argparse.ArgumentParser,
    guarded: Callable[[Callable[[argparse.Namespace], int]], Any],
) -> None:
    """Add the ``changes`` job to ``converge spark``."""
    from framework.cli.common import DURATION_HELP, parse_duration
    from framework.notifications import DEFAULT_RETENTION
    from framework.notifications.reader import DEFAULT_SETTLE

    p = cmds.add_parser(
        "changes", parents=[common, checkpoints_flag()],
        help="export the current rows changed since a consumer's checkpoint to Parquet, then commit",
        description="Read the consumer's notification entries since its checkpoint, write the current "
        "rows of the changed keys (and of re-read tenants) per table to OUT/<table> as Parquet, with "
        "_deleted, _reread and _version columns, then commit. Exit 3 when the checkpoint is older than "
        "the retention.",
    )  # fmt: skip
    p.add_argument("--consumer", required=True, help="the consumer's name (its checkpoint's)")
    p.add_argument("--out", required=True, help="output directory: one Parquet directory per table")
    p.add_argument("--table", action="append", default=[], help="only this table (repeatable)")
    p.add_argument("--retention", type=parse_duration, default=float(DEFAULT_RETENTION),
                   help=f"the writers' notification retention ({DURATION_HELP}; default 7d)")  # fmt: skip
    p.add_argument("--settle", type=parse_duration, default=DEFAULT_SETTLE,
                   help=f"read only entries at least this old (default {DEFAULT_SETTLE:g}s)")  # fmt: skip
    p.add_argument("--start", choices=("earliest", "latest"), default="earliest",
                   help="where a consumer without a checkpoint begins")  # fmt: skip
    p.add_argument("--partitions", type=int, default=None, help="read tasks (default: parallelism)")
    p.add_argument("--no-commit", action="store_true", help="leave the checkpoint where it is")
    p.set_defaults(func=guarded(_changes))
