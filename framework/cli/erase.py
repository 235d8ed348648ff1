"""``converge erase``: remove a data subject everywhere (``erase``), or prove it is gone (``erase verify``).

``converge erase --app M:A --subject KIND:VALUE [--dry-run]`` erases (exit 0;
1 when parked records could not be removed yet: a live worker's open
dead-letter segment or a damaged one; run it again). ``converge erase verify
--app M:A --subject KIND:VALUE`` exits 1 and lists the places when any
residue is found, 0 when there is none. Store, index and dead-letter WAL come
from the app's settings (flags, then ``CONVERGE_*``); the erasure key from
``CONVERGE_ERASURE_KEY``. Neither command prints the value.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from framework.cli.common import (
    CliParser,
    UserError,
    app_flag,
    index_flags,
    json_flag,
    load_spec,
    print_json,
    settings_of,
    store_flag,
)

__all__ = ["register"]


def _inputs(args: argparse.Namespace) -> tuple[Any, Any, bytes, Any]:
    from framework.erasure.declare import parse_subject
    from framework.erasure.keyed import ErasureKeyError, erasure_key

    app = load_spec(args.app)
    if not getattr(app, "personal_data", ()):
        raise UserError(f"--app: {app.name} declares no personal data (App(personal_data=...))")
    try:
        subject = parse_subject(args.subject)
        key = erasure_key()
    except (ValueError, ErasureKeyError) as exc:
        raise UserError(str(exc)) from None
    if subject.kind not in {d.kind for d in app.personal_data}:
        kinds = sorted({d.kind for d in app.personal_data})
        raise UserError(f"--subject: {app.name} declares no personal data of kind {subject.kind!r} ({kinds})")
    return app, subject, key, settings_of(args, app.name)


async def _with_stores(app: Any, settings: Any, use: Any) -> Any:
    from stores.open import open_search_index, open_wide_store

    store = await open_wide_store(settings.wide_store)
    index = None
    try:
        if app.projections and settings.es_url:
            index = open_search_index(settings.es_url, settings.es_tombstones)
        return await use(store, index)
    finally:
        if index is not None:
            await index.close()
        await store.close()


def _erase(args: argparse.Namespace) -> int:
    from framework.cli.job_turn import aggregate_targets
    from framework.dlq.offload import open_objects
    from framework.erasure.run import erase

    app, subject, key, settings = _inputs(args)
    if app.projections and not settings.es_url:
        raise UserError("--es-url: the app has projections: give the index (or set CONVERGE_ES_URL)")

    async def use(store: Any, index: Any) -> Any:
        announcer, aggregates = aggregate_targets(app, settings, store)
        try:
            return await erase(app, subject, key=key, store=store, index=index, dlq_root=settings.dlq_root,
                               dlq_objects=open_objects(settings), aggregates=aggregates,
                               exports=args.export, dry_run=args.dry_run)  # fmt: skip
        finally:
            if announcer is not None:
                await announcer.close()

    report = asyncio.run(_with_stores(app, settings, use))
    if args.json:
        print_json(report.to_dict())
    else:
        verb = "would erase" if report.dry_run else "erased"
        print(f"{verb} {report.kind} subject {report.subject[:16]}… of {report.app}"
              f" ({report.scanned} rows scanned, {report.seconds:.2f}s)")  # fmt: skip
        for table, n in sorted(report.rows.items()):
            print(f"  rows deleted      {table}: {n}")
        for table, n in sorted(report.cells.items()):
            print(f"  cells tombstoned  {table}: {n} rows")
        for name, n in sorted(report.documents.items()):
            print(f"  documents         {name}: {n} re-projected")
        print(f"  notifications     {report.notifications} entries rewritten")
        print(f"  dead-letter WAL   {report.parked} records removed")
        for path, n in sorted(report.exports.items()):
            print(f"  export            {path}: {n} records removed")
        if app.delivery is not None:
            print(f"  delivery ledger   {report.ledger} rows deleted")
        if not report.complete:
            held, damaged = report.parked_held_open, report.parked_damaged
            print(f"  INCOMPLETE: {held} parked records in a live writer's open segments, {damaged}"
                  " damaged segments; run it again after rotation (or salvage)")  # fmt: skip
    return 0 if report.complete else 1


def _verify(args: argparse.Namespace) -> int:
    from framework.dlq.offload import open_objects
    from framework.erasure.verify import verify

    app, subject, key, settings = _inputs(args)

    async def use(store: Any, index: Any) -> Any:
        return await verify(app, subject, key=key, store=store, index=index, dlq_root=settings.dlq_root,
                            dlq_objects=open_objects(settings),
                            exports=args.export)  # fmt: skip

    residue = asyncio.run(_with_stores(app, settings, use))
    if args.json:
        print_json({"clean": not residue, "residue": [{"place": r.place, "where": r.where} for r in residue]})
    elif residue:
        print(f"residue of the {subject.kind} subject in {len(residue)} place(s):")
        for r in residue:
            print(f"  {r.place:<14} {r.where}")
    else:
        print(f"no residue of the {subject.kind} subject in {app.name}")
    return 1 if residue else 0


def _run(args: argparse.Namespace) -> int:
    return _verify(args) if args.action == "verify" else _erase(args)


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``erase`` (and ``erase verify``) to the ``converge`` subcommands."""
    p = sub.add_parser(
        "erase",
        help="erase a data subject everywhere converge keeps data, or verify it",
        parents=[
            app_flag(),
            store_flag("store URL (default: the app's settings)"),
            index_flags("index URL (default: the app's settings)"),
            json_flag("print the report as JSON"),
        ],
    )
    p.add_argument("action", nargs="?", choices=("verify",), help="verify: look for residue (exit 1 if any)")
    p.add_argument("--subject", required=True, help="KIND:VALUE, e.g. email:ann@example.com")
    p.add_argument("--dry-run", action="store_true", help="count what would be erased, change nothing")
    p.add_argument("--export", action="append", default=[], metavar="PATH",
                   help="a dead-letter export file or a directory of them (repeatable)")  # fmt: skip
    p.add_argument("--dlq-root", help="dead-letter WAL directory (default: the app's settings)")
    p.set_defaults(func=_run)
