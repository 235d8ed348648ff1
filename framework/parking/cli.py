"""``converge dlq``: inspect, replay, discard, export and clean up parked events."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from framework.parking.index import SegmentFilter, SegmentInfo, Status
from framework.parking.store import LIVE, ParkingStore

__all__ = ["register", "parse_when", "parse_duration", "DEFAULT_ROOT"]

DEFAULT_ROOT = Path(".converge/dlq")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``30s``, ``15m``, ``2h``, ``7d`` or ``1w``."""
    try:
        return float(text)
    except ValueError:
        pass
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30m, 2h, 7d)")
    return float(m.group(1)) * _UNIT[m.group(2)]


def parse_when(text: str, now: float) -> float:
    """Epoch seconds for an epoch number, an ISO-8601 time (UTC unless it has an offset) or a
    duration ago (``2h`` = two hours before ``now``)."""
    try:
        return float(text)
    except ValueError:
        pass
    if _DURATION.fullmatch(text.strip()):
        return now - parse_duration(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (epoch, ISO-8601 or e.g. 2h)") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


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
    now = datetime.now(UTC).timestamp()
    chosen = tuple(Status(s) for s in args.status) if getattr(args, "status", None) else statuses
    return SegmentFilter(
        pipeline=args.pipeline, event_type=args.event_type, stage=args.stage, error_class=args.error_class,
        since=None if args.since is None else parse_when(args.since, now),
        until=None if args.until is None else parse_when(args.until, now), statuses=chosen,
    )  # fmt: skip


def _open_store(args: argparse.Namespace) -> ParkingStore:
    from framework.parking.wal import seal_abandoned

    root = Path(args.root)
    if not (root / "index.sqlite3").exists():
        raise SystemExit(f"converge dlq: no dead-letter WAL at {root}")
    store = ParkingStore(root)
    seal_abandoned(store)  # segments left open by a dead writer become replayable
    return store


def _list(args: argparse.Namespace) -> int:
    store = _open_store(args)
    segs = store.segments(_filter(args, None))
    con = _console()
    if args.segments:
        t = Table("id", "pipeline", "event type", "stage", "error class", "status", "records", "size",
                  "first", "last", "path", title=f"segments in {store.root}")  # fmt: skip
        for s in segs:
            t.add_row(str(s.id), *map(_cell, s.partition), s.status.value, str(s.count), _size(s.bytes),
                      _ts(s.first_ts), _ts(s.last_ts), s.path)  # fmt: skip
        con.print(t)
        return 0
    groups: dict[tuple[str, ...], list[SegmentInfo]] = {}
    for s in segs:
        groups.setdefault(tuple(s.partition), []).append(s)
    t = Table("pipeline", "event type", "stage", "error class", "open+sealed", "replayed", "discarded",
              "segments", "size", "first", "last", title=f"parked events in {store.root}")  # fmt: skip
    for part, ss in groups.items():
        kinds = (LIVE, [Status.REPLAYED], [Status.DISCARDED])
        counts = [sum(s.count for s in ss if s.status in st) for st in kinds]
        firsts = [s.first_ts for s in ss if s.first_ts is not None]
        lasts = [s.last_ts for s in ss if s.last_ts is not None]
        size = _size(sum(s.bytes for s in ss))
        t.add_row(*map(_cell, part), *map(str, counts), str(len(ss)), size, _ts(min(firsts, default=None)),
                  _ts(max(lasts, default=None)))  # fmt: skip
    con.print(t)
    return 0


def _show(args: argparse.Namespace) -> int:
    import json

    from framework.parking.record import record_to_json

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
        raise SystemExit(
            "converge dlq replay: give --broker (or set CONVERGE_BROKER, or run converge stack up)"
        )
    return info.kafka_bootstrap


def _count(store: ParkingStore, flt: SegmentFilter) -> tuple[int, int]:
    segs, n = set(), 0
    for e in store.records(flt):
        segs.add(e.segment.id)
        n += 1
    return len(segs), n


def _replay(args: argparse.Namespace) -> int:
    from framework.parking.replay import replay

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
    from framework.parking.lifecycle import discard

    store = _open_store(args)
    flt = _filter(args, (Status.SEALED,))
    if not args.all and flt == SegmentFilter(statuses=flt.statuses):
        raise SystemExit("converge dlq discard: give a filter, or --all to discard every sealed segment")
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
    from framework.parking.export import export_records

    n = export_records(_open_store(args), _filter(args, LIVE), args.out)
    if args.out != "-":
        print(f"exported {n} records to {args.out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from framework.parking.export import import_file
    from framework.parking.wal import DeadLetterWAL, WALLockedError

    try:
        with DeadLetterWAL(args.root, lock_timeout_s=2.0) as wal:
            n = import_file(wal, args.file)
    except (WALLockedError, ValueError) as exc:
        raise SystemExit(f"converge dlq import: {exc}") from None
    print(f"imported {n} records into {args.root}")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    from framework.parking.lifecycle import cleanup

    rep = cleanup(_open_store(args), args.grace, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {rep.segments} replayed/discarded segments ({_size(rep.bytes)})")
    if rep.orphans:
        print(f"{len(rep.orphans)} segment files are not in the index (left in place): {rep.orphans[:5]}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``dlq`` command group to the ``converge`` subparsers."""
    root = argparse.ArgumentParser(add_help=False)
    root.add_argument("--root", type=Path, default=Path(os.environ.get("CONVERGE_DLQ_ROOT", DEFAULT_ROOT)),
                      help="the WAL directory (env CONVERGE_DLQ_ROOT, default .converge/dlq)")  # fmt: skip
    filt = argparse.ArgumentParser(add_help=False)
    for flag in ("--pipeline", "--event-type", "--stage", "--error-class"):
        filt.add_argument(flag, default=None, help="exact partition label")
    filt.add_argument(
        "--since", default=None, help="parked at or after: epoch, ISO-8601 (UTC) or e.g. 2h ago"
    )
    filt.add_argument("--until", default=None, help="parked before: epoch, ISO-8601 (UTC) or e.g. 30m ago")
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
    p = add("show", _show, "print parked records in write order", filt, status)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")
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
