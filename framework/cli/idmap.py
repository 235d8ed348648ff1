"""``converge idmap``: run the ID mutation job of an app (``run``: one turn, or ``--until-idle``) and
show its checkpoints (``status``)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from framework.cli.common import (
    CliParser,
    app_declaring,
    app_flag,
    checkpoints_flag,
    checkpoints_url,
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
    """A turn's report as lines: batches with their processes' counts, the sweep, skipped domains."""
    for batch_id, names in sorted(run.repaired.items()):
        print(f"batch {batch_id} repaired in {', '.join(names)}")
    for batch_id, reports in sorted(run.reports.items()):
        r = reports.get("requests", {})
        m = reports.get("map", {})
        a = reports.get("apply", {})
        print(
            f"batch {batch_id}: {r.get('accepted', 0)} requests accepted, {r.get('parked', 0)} parked; "
            f"{m.get('changed', 0)} map entries changed in {m.get('tenants', 0)} tenants; "
            f"{a.get('cells_moved', 0)} cells moved, {a.get('cells_deleted', 0)} deleted, "
            f"{a.get('rows_touched', 0)} rows touched"
        )
    for batch_id, reports in sorted(run.sweep.items()):
        s = reports.get("sweep", {})
        print(
            f"sweep {batch_id}: {s.get('entries', 0)} notifications, "
            f"{s.get('partitions_read', 0)} partitions read, {s.get('cells_moved', 0)} cells moved"
        )
    if not run.batches and not run.repaired and not run.skipped:
        print("no new request")
    for domain, reason in run.skipped.items():
        print(f"{domain}: not this job's turn: {reason}")


def _run(args: argparse.Namespace) -> int:
    from framework.dlq import DeadLetterWAL
    from framework.erasure.screen import screen_verdict
    from framework.idmutation.job import run_id_mutation
    from framework.idmutation.topic import KafkaLog

    app = app_declaring(args.app, "id_mutation", "id_mutation=IdMutation(...)")
    settings = settings_of(args, app.name)

    async def go() -> Any:
        store = await open_existing_store(settings.wide_store)
        wal = await asyncio.to_thread(DeadLetterWAL, Path(settings.dlq_root))
        try:
            async with job_turn(args, settings, app, store) as turn:
                return await run_id_mutation(
                    app, store, checkpoints=turn.checkpoints, locks=turn.locks, log=KafkaLog(settings.broker),
                    index=turn.index, dlq=wal, predecessor=args.predecessor, start_with=args.start_with,
                    until_idle=args.until_idle, max_offsets=args.max_offsets, settle=args.settle,
                    clock=turn.clock, screen=screen_verdict,  # erased subjects' records are not routed
                )  # fmt: skip
        finally:
            wal.close()
            await store.close()

    run = asyncio.run(go())
    if args.json:
        print_json(run.to_dict())
    else:
        print_run(run)
    return 0 if not run.skipped else 3


def _status(args: argparse.Namespace) -> int:
    from framework.coordination import open_checkpoint_store
    from framework.idmutation.job import ensure_tables, status

    app = app_declaring(args.app, "id_mutation", "id_mutation=IdMutation(...)")
    settings = settings_of(args, app.name)

    async def go() -> Any:
        store = await open_existing_store(settings.wide_store)
        checkpoints = await asyncio.to_thread(
            open_checkpoint_store, checkpoints_url(settings.wide_store, args.checkpoints)
        )
        try:
            await ensure_tables(store, app)
            return await status(store, app, checkpoints)
        finally:
            await checkpoints.close()
            await store.close()

    got = asyncio.run(go())
    if args.json:
        print_json(got)
        return 0
    for name in ("job", "sweep"):
        state = got[name]
        batch = state["batch"]
        where = "no batch yet" if batch is None else f"batch {batch['batch_id']}"
        lagging = f", lagging in {', '.join(state['lagging'])}" if state["lagging"] else ""
        print(f"{state['job']}: {where}{lagging}")
    for table, n in got["rows"].items():
        print(f"{table}: {n} rows")
    return 0


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge idmap`` and its subcommands."""
    common = [
        app_flag("the converge App (with id_mutation=...)"),
        store_flag(),
        checkpoints_flag(),
        json_flag("print the report as JSON"),
    ]
    top = sub.add_parser("idmap", help="cascading ID mutation: collapse requests, move rows to final ids")
    cmds = top.add_subparsers(dest="idmap_command", metavar="SUBCOMMAND", required=True)
    run = cmds.add_parser(
        "run",
        help="one turn of the ID mutation job (every owner table's lock)",
        description="Read new requests from the app's requests topic (malformed ones parked), collapse "
        "the touched tenants, store and publish the changed map entries, move the rows, re-project "
        "their documents, then sweep partitions written under old ids since the last turn. Exit 3 "
        "when the turn was given up (another job holds a table, or its predecessor has not run).",
        parents=[*common, index_flags(), turn_flags("id_mutation")],
    )
    run.add_argument("--broker", default=None, help="Kafka broker (env CONVERGE_BROKER)")
    run.add_argument(
        "--dlq-root", default=None, help="dead-letter WAL for malformed requests (env CONVERGE_DLQ_ROOT)"
    )
    run.add_argument("--until-idle", action="store_true", help="batches until the requests topic is drained")
    run.add_argument("--max-offsets", type=int, default=None, help="offsets per partition per batch")
    run.add_argument(
        "--settle",
        type=float,
        default=30.0,
        help="seconds a notification must be old before the sweep reads it",
    )
    run.set_defaults(func=_run)
    st = cmds.add_parser(
        "status", help="the job's checkpoints and the size of its request and map tables", parents=common
    )
    st.set_defaults(func=_status)
