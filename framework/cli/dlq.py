"""``converge dlq``: inspect, verify, replay, discard, export, salvage and clean up parked events.

With the object-storage settings (``CONVERGE_DLQ_OBJECTS`` and ``CONVERGE_DLQ_S3_*``) and no
``--root``, every command works on the uploaded segments of every host (``framework.dlq.bucket``):
the changing ones (replay, discard, cleanup, salvage) lease each segment they change. With
``--root`` (or without the settings) they work on one local WAL directory.

Exit status: 0 on success, 2 for bad input (one line on stderr), 1 when the
command found damaged segments (their unreadable records are named on stderr
and they are left as they were), met segments another command holds, or failed otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from framework.cli.common import (
    CliParser,
    UserError,
    add_json_flag,
    app_flag,
    load_spec,
    parse_duration,
    print_json,
    retention_rules,
    window_flags,
)
from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter, Status
from framework.dlq.store import LIVE, DeadLetterStore, Entry

if TYPE_CHECKING:
    from framework.dlq.bucket import BucketView, Published

__all__ = ["register", "dlq_root"]


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def _ts(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _cell(text: str, width: int = 80) -> str:
    """Event-derived text made safe for a terminal table: no markup, no control characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return escape(shown if len(shown) <= width else shown[: width - 1] + "…")


def _preview(b: bytes | None, width: int = 60) -> str:
    if b is None:
        return "null"
    return _cell(repr(b)[2:-1], width)


def _positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _out_path(text: str) -> str:
    """An argparse ``type``: '-' or a file path in an existing, writable directory."""
    if text == "-":
        return text
    path = Path(text)
    parent = path.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {str(parent)!r} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"directory {str(parent)!r} is not writable")
    return text


def _report_damage(damaged: Sequence[SegmentHealth], label: str) -> int:
    """Name every damaged segment on stderr; the exit status: 1 if there was any, else 0."""
    for h in damaged:
        print(f"{label} (damaged): {h.describe()}", file=sys.stderr)
    if damaged:
        n = sum(h.unreadable for h in damaged)
        print(f"{len(damaged)} damaged segments ({n} unreadable records) {label}; see converge dlq verify;"
              " converge dlq salvage keeps their readable records (and tracks again those whose manifest"
              " is unreadable)", file=sys.stderr)  # fmt: skip
    return 1 if damaged else 0


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
    from framework.settings import Settings, env_setting

    if args.root is not None:
        return Path(args.root)
    app_id: str | None = None
    if args.app is not None:
        app = load_spec(args.app)
        app = app() if not isinstance(app, App) and callable(app) else app
        if not isinstance(app, App):
            raise UserError(f"--app {args.app} is not a converge App (got {type(app).__name__})")
        app_id = app.name
    elif not env_setting("app_id") and any(env_setting(k) for k in ("dlq_root", "data_dir")):
        app_id = "-"  # the app id only names the default data dir, which the environment gives
    try:
        return Settings.resolve(app_id).dlq_root
    except ValueError:
        raise UserError(
            "which dead-letter WAL? give --root DIR or --app MODULE:ATTR, or set CONVERGE_DLQ_ROOT, "
            "CONVERGE_DATA_DIR or CONVERGE_APP_ID"
        ) from None


@dataclass
class _Where:
    """The parked events a command works on: a local WAL root, or every host's in a bucket (``view``)."""

    store: DeadLetterStore
    label: str
    view: BucketView | None = None
    busy: int = 0
    published: Published | None = None

    def status(self, damaged: int) -> int:
        """The exit status: 1 when damaged segments or segments others held were left out."""
        return 1 if damaged or self.busy else 0


@contextmanager
def _opened(args: argparse.Namespace, *, create: bool = False) -> Iterator[_Where]:
    """The bucket of the object-storage settings unless ``--root`` names a local WAL, else the local WAL
    (which must exist unless ``create``)."""
    from framework.dlq.bucket import BucketView
    from framework.dlq.offload import open_objects
    from framework.dlq.wal import seal_abandoned
    from framework.settings import Settings, env_setting

    objects = None
    if args.root is None:
        try:
            objects = open_objects(Settings.resolve(env_setting("app_id") or "-"))
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if objects is not None:
        with BucketView(objects) as view:
            for name, why in sorted(view.unreadable.items()):
                print(f"unreadable manifest of {name}: {why}", file=sys.stderr)
            yield _Where(view.store, view.url, view)
        return
    root = dlq_root(args)
    if not create and not (root / "index.sqlite3").exists():
        raise UserError(f"no dead-letter WAL at {root}")
    store = DeadLetterStore(root, quiet=True)  # every command reports damage itself
    seal_abandoned(store)  # segments left open by a dead writer become replayable
    try:
        yield _Where(store, str(store.root))
    finally:
        store.close()


@contextmanager
def _changing(
    where: _Where, flt: SegmentFilter, *, quarantine: bool = False, names: list[str] | None = None
) -> Iterator[DeadLetterStore]:
    """The store a changing command works on: the local one, or the leased segments ``flt`` (or
    ``names``) selects, published when the block ends; those others hold are named on stderr."""
    if where.view is None:
        yield where.store
        return
    from framework.dlq.bucket import busy_lines

    with where.view.claim(flt, names) as claim:
        claim.quarantine = quarantine
        for line in busy_lines(claim.busy):
            print(f"left out, another command holds it: {line}", file=sys.stderr)
        yield claim.store
    where.busy = len(claim.busy)
    where.published = claim.published


_LABELS = ("pipeline", "event_type", "stage", "error_class")
_MARKED = (Status.REPLAYED, Status.DISCARDED)
_NOT_OPEN = (Status.SEALED, *_MARKED)


def _damage_caption(health: list[SegmentHealth]) -> str:
    bad = [h for h in health if h.damaged]
    if not bad:
        return "damaged: none (every segment file read back in full)"
    n = sum(h.unreadable for h in bad)
    return f"damaged: {n} unreadable records in {len(bad)} segments (converge dlq verify says where)"


def _list(where: _Where, args: argparse.Namespace) -> int:
    store = where.store
    health = store.check_all(_filter(args, None))  # reads every file: the index alone cannot see damage
    if args.segments:
        if args.json:
            print_json([{"id": s.id, **dict(zip(_LABELS, s.partition, strict=True)), "status": s.status.value,
                         "records": _records(h), "damaged": h.unreadable if h.damaged else 0,
                         "bytes": s.bytes, "first": s.first_ts, "last": s.last_ts, "path": s.path}
                        for h in health for s in [h.segment]])  # fmt: skip
            return 0
        t = Table("id", "pipeline", "event type", "stage", "error class", "status", "records", "damaged",
                  "size", "first", "last", "path", title=f"segments in {where.label}",
                  caption=_damage_caption(health))  # fmt: skip
        for h in health:
            s = h.segment
            t.add_row(str(s.id), *map(_cell, s.partition), s.status.value, str(_records(h)), _damaged(h),
                      _size(s.bytes), _ts(s.first_ts), _ts(s.last_ts), s.path)  # fmt: skip
        _console().print(t)
        return 0
    groups: dict[tuple[str, ...], list[SegmentHealth]] = {}
    for h in health:
        groups.setdefault(tuple(h.segment.partition), []).append(h)
    rows: list[dict[str, Any]] = []
    for part, hs in groups.items():
        ss = [h.segment for h in hs]
        kinds = (LIVE, [Status.REPLAYED], [Status.DISCARDED])
        live, replayed, discarded = (sum(_records(h) for h in hs if h.segment.status in st) for st in kinds)
        firsts = [s.first_ts for s in ss if s.first_ts is not None]
        lasts = [s.last_ts for s in ss if s.last_ts is not None]
        rows.append({**dict(zip(_LABELS, part, strict=True)), "live": live, "replayed": replayed,
                     "discarded": discarded, "damaged": sum(h.unreadable for h in hs if h.damaged),
                     "damaged_segments": sum(1 for h in hs if h.damaged), "segments": len(ss),
                     "bytes": sum(s.bytes for s in ss), "first": min(firsts, default=None),
                     "last": max(lasts, default=None)})  # fmt: skip
    if args.json:
        print_json(rows)
        return 0
    t = Table("pipeline", "event type", "stage", "error class", "open+sealed", "replayed", "discarded",
              "damaged", "segments", "size", "first", "last", title=f"parked events in {where.label}",
              caption=_damage_caption(health))  # fmt: skip
    for r in rows:
        damaged = f"{r['damaged']} in {r['damaged_segments']} seg" if r["damaged_segments"] else "0"
        t.add_row(*(_cell(r[k]) for k in _LABELS), str(r["live"]), str(r["replayed"]), str(r["discarded"]),
                  damaged, str(r["segments"]), _size(r["bytes"]), _ts(r["first"]),
                  _ts(r["last"]))  # fmt: skip
    _console().print(t)
    return 0


def _damaged(h: SegmentHealth) -> str:
    return "-" if not h.damaged else str(h.unreadable) if h.unreadable else "yes (0 unreadable)"


def _records(h: SegmentHealth) -> int:
    """The records of a segment: what its index or manifest counts, or more when more are in it."""
    return max(h.segment.count, h.readable + h.unreadable)


def _verify(where: _Where, args: argparse.Namespace) -> int:
    health = where.store.check_all(_filter(args, None))
    orphans = where.view.orphans() if where.view is not None else []
    bad = [h for h in health if h.damaged]
    lost = [u for u in where.view.untracked.values() if u.manifest is None] if where.view is not None else []
    for u in lost:  # a manifest that cannot be read, and no segment to find its records from
        print(f"DAMAGED {u.name}: unreadable manifest ({u.why}) and {u.problem}; converge dlq salvage"
              f" {'records the loss' if 'missing' in (u.problem or '') else 'leaves it for a person'}",
              file=sys.stderr if args.json else sys.stdout)  # fmt: skip
    if args.json:
        print_json([{"id": h.segment.id, **dict(zip(_LABELS, h.segment.partition, strict=True)),
                     "status": h.segment.status.value, "path": h.segment.path, "indexed": h.segment.count,
                     "readable": h.readable, "unreadable": h.unreadable,
                     "damage": [d._asdict() for d in h.damage]} for h in health])  # fmt: skip
        for name in orphans:
            print(f"segment object without a manifest (not listed, not replayed): {name}", file=sys.stderr)
    else:
        t = Table("id", "pipeline", "event type", "stage", "error class", "status", "readable", "unreadable",
                  "path", title=f"segment check of {where.label}")  # fmt: skip
        for h in health:
            s = h.segment
            t.add_row(str(s.id), *map(_cell, s.partition), s.status.value, str(h.readable),
                      str(h.unreadable) if h.damaged else "0", s.path)  # fmt: skip
        _console().print(t)
        for h in bad:
            print(f"DAMAGED {h.describe()}")
        n = sum(h.unreadable for h in bad)
        for name in orphans:
            print(f"ORPHAN {name}: a segment object without a manifest (a writer stopped between the two"
                  " puts); converge dlq salvage adopts it")  # fmt: skip
        print(
            f"{len(health)} segments checked: {len(bad)} damaged, {n} unreadable records"
            + (f"; {len(orphans)} segment objects without a manifest" if orphans else "")
            + (f"; {len(lost)} unreadable manifests without a segment" if lost else "")
        )
    return 1 if bad or orphans or lost else 0


def _show(where: _Where, args: argparse.Namespace) -> int:
    import json

    from framework.dlq.record import record_to_json

    entries, damaged = [], []
    for item in where.store.merged(_filter(args, LIVE)):
        if isinstance(item, Entry):
            entries.append(item)
            if len(entries) >= args.limit:
                break
        elif item.health.damaged:
            damaged.append(item.health)
    if damaged:
        n = sum(h.unreadable for h in damaged)
        print(f"{len(damaged)} damaged segments: {n} unreadable records skipped (their readable ones are"
              " shown); see converge dlq verify", file=sys.stderr)  # fmt: skip
    if args.json:
        for e in entries:
            print(json.dumps(record_to_json(e.record, e.lsn)))
        return 0
    t = Table("lsn", "parked at", "pipeline/event/stage", "error class", "source", "key", "value", "error",
              title=f"first {len(entries)} matching records")  # fmt: skip
    for e in entries:
        r = e.record
        place = _cell(f"{r.pipeline}/{r.event_type}/{r.stage}")
        source = _cell(f"{r.topic}[{r.partition}]@{r.offset}")
        t.add_row(str(e.lsn), _ts(r.parked_at), place, _cell(r.error_class), source, _preview(r.key, 24),
                  _preview(r.value), _cell(r.error))  # fmt: skip
    _console().print(t)
    return 0


def _broker(args: argparse.Namespace) -> str:
    if args.broker:
        return str(args.broker)
    from framework.cli.stack import DEFAULT_STACK_DIR
    from framework.local_stack import LocalStack
    from framework.settings import env_setting

    broker = env_setting("broker")
    if broker:
        return broker
    info = LocalStack.read_state(DEFAULT_STACK_DIR)
    if info is None:
        raise UserError("give --broker (or set CONVERGE_BROKER, or run converge stack up)")
    return info.kafka_bootstrap


def _count(store: DeadLetterStore, flt: SegmentFilter) -> tuple[int, int, list[SegmentHealth]]:
    """Segments and records ``flt`` selects, not counting damaged segments (also returned)."""
    health = store.check_all(flt)
    bad = {h.segment.id for h in health if h.damaged}
    segs, n = set(), 0
    for e in store.records(flt):
        if e.segment.id not in bad:
            segs.add(e.segment.id)
            n += 1
    return len(segs), n, [h for h in health if h.damaged]


def _withhold(args: argparse.Namespace) -> Any:
    """The erasure's replay screen of ``--app`` (``framework.erasure.parked``; None without ``--app``,
    personal data or erased subjects): from the store of record when another is named, else the app's."""
    if args.app is None:
        return None
    from framework.erasure.keyed import ErasureKeyError, erasure_key
    from framework.erasure.parked import parked_screen
    from framework.erasure.record import TARGET
    from framework.settings import Settings
    from stores.open import open_wide_store

    app = load_spec(args.app)
    if not getattr(app, "personal_data", ()):
        return None
    settings = Settings.resolve(app.name)
    url = settings.wide_store if settings.denylist_store in (None, TARGET) else settings.denylist_store

    async def load() -> Any:
        store = await open_wide_store(url)
        try:
            return await parked_screen(store, app, erasure_key(required=False))
        finally:
            await store.close()

    try:
        return asyncio.run(load())
    except ErasureKeyError as exc:
        raise UserError(str(exc)) from None


def _replay(where: _Where, args: argparse.Namespace) -> int:
    from framework.dlq.replay import replay

    flt = _filter(args, (Status.SEALED,))
    if args.dry_run:
        segs, n, bad = _count(where.store, flt)
        print(f"would replay {n} records from {segs} segments")
        return _report_damage(bad, "would not be replayed")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    broker = _broker(args)
    withhold = _withhold(args)  # records of erased subjects are not replayed
    with _changing(where, flt) as store:
        rep = asyncio.run(replay(store, flt, broker=broker, topic=args.topic, progress=progress,
                                 withhold=withhold))  # fmt: skip
    to = ", ".join(f"{k}: {v}" for k, v in sorted(rep.topics.items())) or "-"
    print(f"replayed {rep.records} records ({to}); {rep.segments} segments marked replayed")
    if rep.withheld:
        print(f"{rep.withheld} records of erased subjects withheld (not replayed)")
    if rep.skipped_open:
        print(
            f"{rep.skipped_open} open segments left out: a live worker is writing them (sealed on rotation)"
        )
    return max(_report_damage(rep.damaged, "not replayed"), where.status(0))


def _discard(where: _Where, args: argparse.Namespace) -> int:
    from framework.dlq.lifecycle import discard

    flt = _filter(args, (Status.SEALED,))
    if not args.all and flt == SegmentFilter(statuses=flt.statuses):
        raise UserError("give a filter, or --all to discard every sealed segment")
    if args.dry_run:
        segs, n, bad = _count(where.store, flt)
        print(f"would discard {n} records from {segs} segments")
        return _report_damage(bad, "would not be discarded")
    with _changing(where, flt) as store:
        out = discard(store, flt)
    print(f"discarded {out.records} records in {out.segments} segments (deleted by cleanup after the grace"
          " period)")  # fmt: skip
    if out.skipped_open:
        print(f"{out.skipped_open} open segments left out: a live worker is writing them")
    return max(_report_damage(out.damaged, "not discarded"), where.status(0))


def _export(where: _Where, args: argparse.Namespace) -> int:
    from framework.dlq.export import export_records

    rep = export_records(where.store, _filter(args, LIVE), args.out)
    to = "stdout" if args.out == "-" else args.out
    if rep.damaged and not rep.unreadable:  # every record read, from segments damaged otherwise
        print(f"exported {rep.records} records to {to}, from {len(rep.damaged)} damaged segments among"
              " others", file=sys.stderr)  # fmt: skip
        return _report_damage(rep.damaged, "exported, but damaged")
    if rep.damaged:
        print(f"exported {rep.records} of {rep.records + rep.unreadable} records to {to}: {rep.unreadable}"
              f" records could not be read", file=sys.stderr)  # fmt: skip
        return _report_damage(rep.damaged, "not exported in full")
    if args.out != "-":
        print(f"exported {rep.records} records to {args.out}", file=sys.stderr)
    return 0


def _import(where: _Where, args: argparse.Namespace) -> int:
    import tempfile

    from framework.dlq.export import import_file
    from framework.dlq.offload import offload
    from framework.dlq.wal import DeadLetterWAL, WALLockedError

    if not args.file.is_file():
        raise UserError(f"no such file: {args.file}")
    if where.view is None:
        root = where.store.root
    else:  # parked in a scratch WAL, then uploaded and tracked like a worker's segments
        root = Path(tempfile.mkdtemp(prefix="converge-dlq-import-"))
    try:
        with DeadLetterWAL(root, lock_timeout_s=2.0) as wal:
            n = import_file(wal, args.file)
            if where.view is not None:
                wal.rotate_sync(force=True)
                offload(wal.store, where.view.objects)
                left = wal.segments()
                if left:
                    raise UserError(f"{len(left)} imported segments not uploaded; they are kept in {root}")
    except (WALLockedError, ValueError) as exc:
        raise UserError(str(exc)) from None
    if where.view is not None:
        import shutil

        shutil.rmtree(root)
    print(f"imported {n} records into {where.label}")
    return 0


def _cleanup(where: _Where, args: argparse.Namespace) -> int:
    from framework.dlq.lifecycle import cleanup
    from framework.dlq.retention import DeadLetterRetention, expire, past_retention
    from framework.settings import Settings, env_setting

    policy = args.retention
    if policy is None:  # the dlq_retention setting (CONVERGE_DLQ_RETENTION)
        try:
            policy = DeadLetterRetention.parse(Settings.resolve(env_setting("app_id") or "-").dlq_retention)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if args.dry_run:
        old = expire(where.store, policy, dry_run=True)
        rep = cleanup(where.store, args.grace, dry_run=True)
    else:
        now = where.store.clock()
        names = [
            s.path
            for s in where.store.segments(SegmentFilter(statuses=_NOT_OPEN))
            if past_retention(policy, s, now) or (s.status in _MARKED and s.status_at <= now - args.grace)
        ]
        with _changing(where, SegmentFilter(statuses=_NOT_OPEN), names=names) as store:
            old = expire(store, policy)
            rep = cleanup(store, args.grace)
    verb = "would delete" if args.dry_run else "deleted"
    never = f", {old.unreplayed} of them never replayed" if old.unreplayed else ""
    print(f"{verb} {old.segments} segments past their retention ({old.records} records{never};"
          f" {_size(old.bytes)}); retention: {policy.describe()}")  # fmt: skip
    for p in old.partitions():  # labels come from event data: no markup, no control characters
        _console().print(f"  {_cell(p.describe(), 1000)}", soft_wrap=True)
    both = "; a dry run counts those also past their retention twice" if args.dry_run and old.segments else ""
    print(f"{verb} {rep.segments} replayed/discarded segments past the grace period"
          f" ({_size(rep.bytes)}{both})")  # fmt: skip
    orphans = rep.orphans if where.view is None else where.view.orphans()
    if orphans:
        print(f"{len(orphans)} segment files are not in the index (left in place): {orphans[:5]}")
    kept = {h.segment.id: h for h in (*old.damaged, *rep.damaged)}
    return max(_report_damage(list(kept.values()), "not deleted"), where.status(0))


def _salvage(where: _Where, args: argparse.Namespace) -> int:
    from framework.dlq.bucket import QUARANTINE_PREFIX
    from framework.dlq.lifecycle import LOST_SUFFIX, salvage

    flt = _filter(args, None)
    left, repaired = 0, set()
    if where.view is not None:
        orphans, untracked = where.view.orphans(), where.view.untracked
        if args.dry_run:
            print(f"would adopt {len(orphans)} segment objects without a manifest")
            for u in untracked.values():
                what = f"track its {u.manifest.count} records again" if u.manifest else u.problem
                print(f"would repair the unreadable manifest of {u.name}: {what}")
        else:
            adopted = where.view.adopt(orphans)
            left = len(orphans) - len(adopted)
            print(f"adopted {len(adopted)} segment objects without a manifest"
                  + (f"; {left} could not be read (see the log)" if left else ""))  # fmt: skip
            for r in where.view.repair_untracked():
                u = r.untracked
                repaired.add(u.name)
                if u.manifest is not None:
                    print(
                        f"adopted {u.name}: its manifest was unreadable ({u.why}); its {u.manifest.count}"
                        f" records are tracked again, as sealed; old manifest -> {r.quarantined}"
                    )
                else:
                    print(f"cleared {u.name}: unreadable manifest ({u.why}) and {u.problem}: its records are"
                          f" lost (how many is unknown); old manifest -> {r.quarantined}")  # fmt: skip
            left += len(untracked) - len(repaired)
    if args.dry_run:
        done = salvage(where.store, flt, dry_run=True)
    else:
        damaged = [h.segment.path for h in where.store.check_all(flt)
                   if h.damaged and h.segment.path not in repaired]  # fmt: skip
        with _changing(where, flt, quarantine=True, names=damaged) as store:
            done = salvage(store, flt)
    verb = "would salvage" if args.dry_run else "salvaged"
    lost = where.published.lost if where.published is not None else {}
    for s in done:
        h = s.health
        if s.missing or h.segment.path in lost:
            where_lost = f"{QUARANTINE_PREFIX}{h.segment.path}{LOST_SUFFIX}" if where.view else s.quarantined
            verb_lost = "would clear" if args.dry_run else "cleared"
            print(f"{verb_lost} {h.describe()}; {h.unreadable} records lost; recorded in {where_lost}")
            continue
        kept = f"{h.readable} readable records kept" + (f" in {s.new_path}" if s.new_path else "")
        print(f"{verb} {h.describe()}; {kept}; damaged file -> {s.quarantined}")
    print(f"{verb} {len(done)} damaged segments")
    return where.status(left)


def _run(fn: Callable[[_Where, argparse.Namespace], int], args: argparse.Namespace) -> int:
    with _opened(args, create=fn is _import) as where:
        return fn(where, args)


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add the ``dlq`` command group to the ``converge`` subparsers."""
    app = app_flag("the converge App whose app id names the default WAL directory", required=False)
    root = CliParser(add_help=False, parents=[app])
    root.add_argument("--root", type=Path, default=None,
                      help="the WAL directory (default: the worker's: CONVERGE_DLQ_ROOT, else "
                           "<CONVERGE_DATA_DIR or var/<app id>>/dlq)")  # fmt: skip
    filt = CliParser(add_help=False, parents=[window_flags("parked")])
    for flag in ("--pipeline", "--event-type", "--stage", "--error-class"):
        filt.add_argument(flag, default=None, help="exact partition label")
    status = CliParser(add_help=False)
    status.add_argument("--status", action="append", choices=[s.value for s in Status],
                        help="segment status (repeatable)")  # fmt: skip
    dry = CliParser(add_help=False)
    dry.add_argument("--dry-run", action="store_true", help="only say what would change")

    dlq = sub.add_parser(
        "dlq", help="parked (dead-letter) events: list, show, verify, replay, discard, export"
    )
    cmds = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", required=True)

    def add(name: str, fn: Callable[[_Where, argparse.Namespace], int], text: str,
            *parents: CliParser) -> CliParser:  # fmt: skip
        p = cmds.add_parser(name, help=text, parents=[root, *parents])
        p.set_defaults(func=lambda args: _run(fn, args))
        return p

    p = add("list", _list, "parked events per partition (or per segment)", filt, status)
    p.add_argument("--segments", action="store_true", help="one row per segment file")
    add_json_flag(p)
    p = add("show", _show, "print parked records in write order", filt, status)
    p.add_argument("--limit", type=_positive_int, default=20, help="at most this many records (default 20)")
    add_json_flag(p, "JSON lines (one record per line) instead of a table")
    p = add("replay", _replay, "re-publish sealed records to their source topic, then mark them", filt, dry)
    p.add_argument("--broker", default=None, help="HOST:PORT (env CONVERGE_BROKER, else the local stack)")
    p.add_argument("--topic", default=None, help="send to this topic instead of each record's source topic")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")  # fmt: skip
    p = add("discard", _discard, "mark sealed records discarded (deleted by cleanup)", filt, dry)
    p.add_argument("--all", action="store_true", help="allow discarding without a filter")
    p = add("export", _export, "write matching records to one portable JSON-lines file", filt, status)
    p.add_argument("--out", required=True, type=_out_path, help="output file ('-' for stdout)")
    p = add("import", _import, "park the records of an export file again")
    p.add_argument("file", type=Path)
    p = add("verify", _verify, "read every segment file; exit 1 if any record is unreadable", filt, status)
    add_json_flag(p)
    p = add("salvage", _salvage, "move damaged segments to quarantine/, keeping their readable records",
            filt, status, dry)  # fmt: skip
    p = add("cleanup", _cleanup, "delete segments past their retention, and replayed/discarded ones past"
            " the grace period", dry)  # fmt: skip
    p.add_argument("--grace", type=parse_duration, default=parse_duration("7d"),
                   help="keep marked segments this long (default 7d)")  # fmt: skip
    p.add_argument("--retention", type=retention_rules, default=None, metavar="RULES",
                   help="PATTERN=DURATION rules, e.g. orders=30d,*/*/*/Timeout=7d, or forever (default:"
                        " CONVERGE_DLQ_RETENTION, else forever); deletes segments of any status but open"
                        " whose newest record is older")  # fmt: skip
