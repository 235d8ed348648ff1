"""``converge dlq``: inspect, replay, discard, export and clean up parked events."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from framework.cli_support import (
    TIME_HELP,
    UserError,
    add_json_flag,
    load_spec,
    parse_duration,
    print_json,
    time_arg,
)
from framework.dlq.index import SegmentFilter, SegmentInfo, Status
from framework.dlq.store import LIVE, DeadLetterStore

__all__ = ["register", "dlq_root"]


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def _ts(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _cell(text: str, width: int = 80) -> str:
    """Event-derived text made safe for a terminal table: no markup, no control characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return escape(shown if len(shown) <= width else shown[: width - 1] + "…")


def _preview(b: bytes | None, width: int = 60) -> str:
    if b is None:
        return "null"
    return _cell(repr(b)[2:-1], width)


def _filter(args: argparse.Namespace, statuses: tuple[Status, ...] | None) -> SegmentFilter:
    chosen = tuple(Status(s) for s in args.status) if getattr(args, "status", None) else statuses
    return SegmentFilter(
        pipeline=args.pipeline, event_type=args.event_type, stage=args.stage, error_class=args.error_class,
        since=args.since, until=args.until, statuses=chosen,
    )  # fmt: skip


def dlq_root(args: argparse.Namespace) -> Path:
    """The WAL directory: ``--root``, else the worker's ``Settings.dlq_root`` (``CONVERGE_DLQ_ROOT``,
    else ``<CONVERGE_DATA_DIR or var/<app id>>/dlq``) with the app id of ``--app`` or ``CONVERGE_APP_ID``."""
    from framework.app import App
    from framework.settings import ENV, Settings

    if args.root is not None:
        return Path(args.root)
    app_id: str | None = None
    if args.app is not None:
        app = load_spec(args.app)
        app = app() if not isinstance(app, App) and callable(app) else app
        if not isinstance(app, App):
            raise UserError(f"--app {args.app} is not a converge App (got {type(app).__name__})")
        app_id = app.name
    elif not os.environ.get(ENV["app_id"]) and any(os.environ.get(ENV[k]) for k in ("dlq_root", "data_dir")):
        app_id = "-"  # the app id only names the default data dir, which the environment gives
    try:
        return Settings.resolve(app_id).dlq_root
    except ValueError:
        raise UserError(
            "which dead-letter WAL? give --root DIR or --app MODULE:ATTR, or set CONVERGE_DLQ_ROOT, "
            "CONVERGE_DATA_DIR or CONVERGE_APP_ID"
        ) from None


def _open_store(args: argparse.Namespace) -> DeadLetterStore:
    from framework.dlq.wal import seal_abandoned

    root = dlq_root(args)
    if not (root / "index.sqlite3").exists():
        raise UserError(f"no dead-letter WAL at {root}")
    store = DeadLetterStore(root)
    seal_abandoned(store)  # segments left open by a dead writer become replayable
    return store


_LABELS = ("pipeline", "event_type", "stage", "error_class")


def _list(args: argparse.Namespace) -> int:
    store = _open_store(args)
    segs = store.segments(_filter(args, None))
    if args.segments:
        if args.json:
            print_json([{"id": s.id, **dict(zip(_LABELS, s.partition, strict=True)), "status": s.status.value,
                         "records": s.count, "bytes": s.bytes, "first": s.first_ts, "last": s.last_ts,
                         "path": s.path} for s in segs])  # fmt: skip
            return 0
        t = Table("id", "pipeline", "event type", "stage", "error class", "status", "records", "size",
                  "first", "last", "path", title=f"segments in {store.root}")  # fmt: skip
        for s in segs:
            t.add_row(str(s.id), *map(_cell, s.partition), s.status.value, str(s.count), _size(s.bytes),
                      _ts(s.first_ts), _ts(s.last_ts), s.path)  # fmt: skip
        _console().print(t)
        return 0
    groups: dict[tuple[str, ...], list[SegmentInfo]] = {}
    for s in segs:
        groups.setdefault(tuple(s.partition), []).append(s)
    rows: list[dict[str, Any]] = []
    for part, ss in groups.items():
        kinds = (LIVE, [Status.REPLAYED], [Status.DISCARDED])
        live, replayed, discarded = (sum(s.count for s in ss if s.status in st) for st in kinds)
        firsts = [s.first_ts for s in ss if s.first_ts is not None]
        lasts = [s.last_ts for s in ss if s.last_ts is not None]
        rows.append({**dict(zip(_LABELS, part, strict=True)), "live": live, "replayed": replayed,
                     "discarded": discarded, "segments": len(ss), "bytes": sum(s.bytes for s in ss),
                     "first": min(firsts, default=None), "last": max(lasts, default=None)})  # fmt: skip
    if args.json:
        print_json(rows)
        return 0
    t = Table("pipeline", "event type", "stage", "error class", "open+sealed", "replayed", "discarded",
              "segments", "size", "first", "last", title=f"parked events in {store.root}")  # fmt: skip
    for r in rows:
        t.add_row(*(_cell(r[k]) for k in _LABELS), str(r["live"]), str(r["replayed"]), str(r["discarded"]),
                  str(r["segments"]), _size(r["bytes"]), _ts(r["first"]), _ts(r["last"]))  # fmt: skip
    _console().print(t)
    return 0


def _show(args: argparse.Namespace) -> int:
    import json

    from framework.dlq.record import record_to_json

    store = _open_store(args)
    entries = list(islice(store.ordered(_filter(args, LIVE)), args.limit))
    if args.json:
        for e in entries:
            print(json.dumps(record_to_json(e.record, e.lsn)))
        return 0
    t = Table("lsn", "parked at", "pipeline/event/stage", "error class", "source", "key", "value", "error",
              title=f"first {len(entries)} matching records")  # fmt: skip
    for e in entries:
        r = e.record
        where = _cell(f"{r.pipeline}/{r.event_type}/{r.stage}")
        source = _cell(f"{r.topic}[{r.partition}]@{r.offset}")
        t.add_row(str(e.lsn), _ts(r.parked_at), where, _cell(r.error_class), source, _preview(r.key, 24),
                  _preview(r.value), _cell(r.error))  # fmt: skip
    _console().print(t)
    return 0


def _broker(args: argparse.Namespace) -> str:
    if args.broker:
        return str(args.broker)
    if os.environ.get("CONVERGE_BROKER"):
        return os.environ["CONVERGE_BROKER"]
    from framework.local_stack import LocalStack

    info = LocalStack.read_state(Path(".converge/stack"))
    if info is None:
        raise UserError("give --broker (or set CONVERGE_BROKER, or run converge stack up)")
    return info.kafka_bootstrap


def _count(store: DeadLetterStore, flt: SegmentFilter) -> tuple[int, int]:
    segs, n = set(), 0
    for e in store.records(flt):
        segs.add(e.segment.id)
        n += 1
    return len(segs), n


def _replay(args: argparse.Namespace) -> int:
    from framework.dlq.replay import replay

    store = _open_store(args)
    flt = _filter(args, (Status.SEALED,))
    if args.dry_run:
        segs, n = _count(store, flt)
        print(f"would replay {n} records from {segs} segments")
        return 0
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    rep = asyncio.run(replay(store, flt, broker=_broker(args), topic=args.topic, progress=progress))
    to = ", ".join(f"{k}: {v}" for k, v in sorted(rep.topics.items())) or "-"
    print(f"replayed {rep.records} records ({to}); {rep.segments} segments marked replayed")
    if rep.skipped_open:
        print(
            f"{rep.skipped_open} open segments left out: a live worker is writing them (sealed on rotation)"
        )
    return 0


def _discard(args: argparse.Namespace) -> int:
    from framework.dlq.lifecycle import discard

    store = _open_store(args)
    flt = _filter(args, (Status.SEALED,))
    if not args.all and flt == SegmentFilter(statuses=flt.statuses):
        raise UserError("give a filter, or --all to discard every sealed segment")
    if args.dry_run:
        segs, n = _count(store, flt)
        print(f"would discard {n} records from {segs} segments")
        return 0
    out = discard(store, flt)
    print(f"discarded {out.records} records in {out.segments} segments (deleted by cleanup after the grace"
          " period)")  # fmt: skip
    if out.skipped_open:
        print(f"{out.skipped_open} open segments left out: a live worker is writing them")
    return 0


def _export(args: argparse.Namespace) -> int:
    from framework.dlq.export import export_records

    n = export_records(_open_store(args), _filter(args, LIVE), args.out)
    if args.out != "-":
        print(f"exported {n} records to {args.out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from framework.dlq.export import import_file
    from framework.dlq.wal import DeadLetterWAL, WALLockedError

    root = dlq_root(args)
    try:
        with DeadLetterWAL(root, lock_timeout_s=2.0) as wal:
            n = import_file(wal, args.file)
    except (WALLockedError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"imported {n} records into {root}")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    from framework.dlq.lifecycle import cleanup

    rep = cleanup(_open_store(args), args.grace, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {rep.segments} replayed/discarded segments ({_size(rep.bytes)})")
    if rep.orphans:
        print(f"{len(rep.orphans)} segment files are not in the index (left in place): {rep.orphans[:5]}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``dlq`` command group to the ``converge`` subparsers."""
    root = argparse.ArgumentParser(add_help=False)
    root.add_argument("--root", type=Path, default=None,
                      help="the WAL directory (default: the worker's: CONVERGE_DLQ_ROOT, else "
                           "<CONVERGE_DATA_DIR or var/<app id>>/dlq)")  # fmt: skip
    root.add_argument("--app", default=None, metavar="MODULE:ATTR",
                      help="the converge App whose app id names the default WAL directory")  # fmt: skip
    filt = argparse.ArgumentParser(add_help=False)
    for flag in ("--pipeline", "--event-type", "--stage", "--error-class"):
        filt.add_argument(flag, default=None, help="exact partition label")
    filt.add_argument("--since", type=time_arg, default=None, help=f"parked at or after: {TIME_HELP}")
    filt.add_argument("--until", type=time_arg, default=None, help=f"parked before: {TIME_HELP}")
    status = argparse.ArgumentParser(add_help=False)
    status.add_argument("--status", action="append", choices=[s.value for s in Status],
                        help="segment status (repeatable)")  # fmt: skip
    dry = argparse.ArgumentParser(add_help=False)
    dry.add_argument("--dry-run", action="store_true", help="only say what would change")

    dlq = sub.add_parser("dlq", help="parked (dead-letter) events: list, show, replay, discard, export")
    cmds = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], text: str,
            *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:  # fmt: skip
        p = cmds.add_parser(name, help=text, parents=[root, *parents])
        p.set_defaults(func=fn)
        return p

    p = add("list", _list, "parked events per partition (or per segment)", filt, status)
    p.add_argument("--segments", action="store_true", help="one row per segment file")
    add_json_flag(p)
    p = add("show", _show, "print parked records in write order", filt, status)
    p.add_argument("--limit", type=int, default=20)
    add_json_flag(p, "JSON lines (one record per line) instead of a table")
    p = add("replay", _replay, "re-publish sealed records to their source topic, then mark them", filt, dry)
    p.add_argument("--broker", default=None, help="HOST:PORT (env CONVERGE_BROKER, else the local stack)")
    p.add_argument("--topic", default=None, help="send to this topic instead of each record's source topic")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")  # fmt: skip
    p = add("discard", _discard, "mark sealed records discarded (deleted by cleanup)", filt, dry)
    p.add_argument("--all", action="store_true", help="allow discarding without a filter")
    p = add("export", _export, "write matching records to one portable JSON-lines file", filt, status)
    p.add_argument("--out", required=True, help="output file ('-' for stdout)")
    p = add("import", _import, "park the records of an export file again")
    p.add_argument("file", type=Path)
    p = add("cleanup", _cleanup, "delete replayed/discarded segments older than the grace period", dry)
    p.add_argument("--grace", type=parse_duration, default=parse_duration("7d"),
                   help="keep marked segments this long (default 7d)")  # fmt: skip
