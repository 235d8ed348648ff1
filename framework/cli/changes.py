"""``converge changes``: a consumer's notification entries since its checkpoint (``read``), and
moving its checkpoint (``reset``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import Any

from framework.cli.common import (
    DURATION_HELP,
    TIME_HELP,
    CliParser,
    UserError,
    add_json_flag,
    checkpoints_flag,
    checkpoints_url,
    env_store_flag,
    parse_duration,
    print_json,
    time_arg,
)

__all__ = ["register", "GAP_STATUS"]

#: Exit status of ``read`` when the consumer fell behind the retention.
GAP_STATUS = 3


def _iso(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).isoformat(timespec="seconds")


async def _with_reader(args: argparse.Namespace, use: Any) -> Any:
    """Open the store and the checkpoint store, run ``use(reader)``, close both."""
    from framework.coordination import CheckpointError, open_checkpoint_store
    from framework.notifications.reader import NotificationReader
    from stores.open import open_wide_store, sqlite_path

    if args.wide_store.startswith("sqlite:"):
        try:
            path = sqlite_path(args.wide_store)
        except ValueError as exc:
            raise UserError(f"--wide-store: {exc}") from None
        if not path.exists():
            raise UserError(f"--wide-store: {path} does not exist")
    try:
        store = await open_wide_store(args.wide_store)
    except ValueError as exc:
        raise UserError(f"--wide-store: {exc}") from None
    try:
        try:
            checkpoints = await asyncio.to_thread(
                open_checkpoint_store, checkpoints_url(args.wide_store, args.checkpoints)
            )
        except CheckpointError as exc:
            raise UserError(f"--checkpoints: {exc}") from None
        try:
            reader = NotificationReader(
                store, checkpoints, args.consumer, retention=int(args.retention), settle=args.settle,
                start=args.start, tenants=args.tenant or None,
            )  # fmt: skip
            await reader.ensure()
            return await use(reader)
        finally:
            await checkpoints.close()
    finally:
        await store.close()


def _read(args: argparse.Namespace) -> int:
    from framework.notifications.reader import NotificationGap

    async def use(reader: Any) -> tuple[list[Any], Any]:
        entries = await reader.read(args.limit)
        committed = await reader.commit(entries) if args.commit else None
        return entries, committed

    try:
        entries, committed = asyncio.run(_with_reader(args, use))
    except NotificationGap as exc:
        print(f"converge changes read: error: {exc}", file=sys.stderr)
        return GAP_STATUS
    if args.json:
        out: dict[str, Any] = {"consumer": args.consumer, "entries": [e.to_dict() for e in entries]}
        names = ("ingested_at", "tenant", "app", "batch_id", "table")
        out["committed"] = None if committed is None else dict(zip(names, committed, strict=True))
        print_json(out)
        return 0
    for e in entries:
        what = "re-read this tenant's rows" if e.reread else f"{len(e.keys or ())} keys"
        print(f"{_iso(e.ingested_at)}  {e.tenant}  {e.table}  +{e.inserted} ~{e.updated} -{e.deleted}  "
              f"{what}  ({e.app} {e.batch_id})")  # fmt: skip
    state = "committed" if committed is not None else "not committed (add --commit)" if entries else "none"
    print(f"{len(entries)} entries for consumer {args.consumer}: {state}")
    return 0


def _reset(args: argparse.Namespace) -> int:
    async def use(reader: Any) -> Any:
        return await reader.reset(args.to)

    pos = asyncio.run(_with_reader(args, use))
    if args.json:
        print_json({"consumer": args.consumer, "ingested_at": pos[0]})
    else:
        print(f"consumer {args.consumer} now reads entries ingested after {_iso(pos[0])}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    from framework.notifications.reader import DEFAULT_SETTLE
    from framework.notifications.schema import DEFAULT_RETENTION

    p.add_argument("--consumer", required=True, help="the consumer's name (its checkpoint's)")
    p.add_argument(
        "--retention",
        type=parse_duration,
        default=float(DEFAULT_RETENTION),
        help=f"the writers' notification retention ({DURATION_HELP}; default 7d)",
    )
    p.add_argument(
        "--settle",
        type=parse_duration,
        default=DEFAULT_SETTLE,
        help=f"read only entries at least this old ({DURATION_HELP}; default {DEFAULT_SETTLE:g}s)",
    )
    p.add_argument(
        "--start",
        choices=("earliest", "latest"),
        default="earliest",
        help="where a consumer without a checkpoint begins (default: the oldest retained entry)",
    )
    p.add_argument("--tenant", action="append", default=[], help="only this tenant (repeatable)")
    add_json_flag(p, "print JSON")


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge changes`` (``read``, ``reset``) to the ``converge`` parser."""
    changes = sub.add_parser(
        "changes", help="incremental reads: notification entries since a consumer's checkpoint"
    )
    actions = changes.add_subparsers(dest="changes_command", metavar="ACTION", required=True)
    shared = [env_store_flag("store of the notifications"), checkpoints_flag()]
    read = actions.add_parser(
        "read", parents=shared,
        help="the entries since the consumer's checkpoint (commit them with --commit)",
        description="Print the notification entries after the consumer's checkpoint, oldest first: "
        "table, tenant, counts and changed keys (or 're-read'). With --commit the checkpoint moves past "
        "them. Exit 3 when the checkpoint is older than the retention (a gap: "
        "re-read the tables in full, then reset).",
    )  # fmt: skip
    _common(read)
    read.add_argument("--limit", type=int, default=1000, help="most entries (default 1000)")
    read.add_argument("--commit", action="store_true", help="move the checkpoint past the entries printed")
    read.set_defaults(func=_read)
    reset = actions.add_parser(
        "reset", help="move the consumer's checkpoint to a time (default now)", parents=shared,
        description="Move the checkpoint, e.g. after re-reading the tables in full following a gap.",
    )  # fmt: skip
    _common(reset)
    reset.add_argument("--to", type=time_arg, default=None, help=f"{TIME_HELP} (default now)")
    reset.set_defaults(func=_reset)
