"""``converge verify``: every change of an app's store verified against its index, continuously.

``converge verify --app M:A`` follows the app's notification entries (the app must declare
``notifications``) as consumer ``converge-verify``, each once it is ``--settle`` old, and
repairs every document found to differ twice ``--recheck`` apart (``framework.verify``); it
runs until interrupted, printing a summary every ``--report-every``. ``--once`` verifies what
has settled and exits: 0 when nothing is left divergent, 1 when a divergence was parked or a
repair refused by the index (each logged on one line naming the document, the reason and the way
to repair it).
Unrepairable divergences are parked in the dead-letter log at ``--dlq-root`` (default
``<data_dir>/verify/dlq``; ``converge dlq list --root`` shows them, ``replay`` re-projects them).
``--sweep`` first sweeps every view in full, ``--sweep-every`` again and again while it runs: a
sweep digests both sides and builds only the documents whose digests differ from the ledger's
record of their last verification (``framework.verify.sweep``), so it also finds what no
notification announced (index documents changed by hand, rows written past the change feed).
It refuses, with one line and before any write, a store that is not the one the index was built
from (``stores.identity``), and a sweep whose repairs would delete more than ``--max-deletes``
(the setting ``repair_max_deletes``, default 10%,1000) of a view's documents; ``--force`` lets
the ``--sweep`` at the start pass that bound.
``--metrics-port`` serves its ``converge_verify_*`` metrics on 127.0.0.1 (``converge status
--url`` reads them; the setting ``metrics_token``, when set, is required of every request).
Store, index, broker and checkpoints come from the app's settings and the flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

from framework.cli.common import (
    DURATION_HELP,
    CliParser,
    UserError,
    app_declaring,
    checkpoints_flag,
    checkpoints_url,
    data_dir_flag,
    index_flags,
    json_flag,
    parse_duration,
    print_json,
    settings_of,
    store_flag,
)

__all__ = ["register", "exit_code"]


async def _verify(args: argparse.Namespace, app: Any, settings: Any) -> Any:
    from framework.cli.job_turn import aggregate_targets
    from framework.coordination import open_checkpoint_store
    from framework.core.repair_guard import parse_delete_bound
    from framework.dlq import DeadLetterWAL
    from framework.metrics.verifier_endpoint import serve_verifier_metrics
    from framework.verify.assembly import app_sweep, app_verifier
    from stores.open import open_search_index, open_wide_store

    if app.projections and not settings.es_url:
        raise UserError("--es-url: the app has projections: give the index (or set CONVERGE_ES_URL)")
    store = await open_wide_store(settings.wide_store)
    index = open_search_index(settings.es_url, settings.es_tombstones) if app.projections else None
    url = checkpoints_url(settings.wide_store, args.checkpoints)
    checkpoints = await asyncio.to_thread(open_checkpoint_store, url)
    wal = DeadLetterWAL(args.dlq_root or settings.data_dir / "verify" / "dlq")
    announcer, contributions = aggregate_targets(app, settings, store)
    server = None
    try:
        verifier = await app_verifier(app, store, index, contributions, checkpoints, wal,
                                      settle=args.settle, recheck=args.recheck,
                                      store_url=settings.wide_store)  # fmt: skip
        if args.metrics_port is not None:
            server, port = await serve_verifier_metrics(lambda: verifier.stats, args.metrics_port,
                                                        token=settings.metrics_token)  # fmt: skip
            print(f"metrics: http://127.0.0.1:{port}/metrics", flush=True)
        every = args.sweep_every
        sweep = None
        if every is not None or args.sweep:
            sweep = await app_sweep(
                verifier, app, checkpoints, every, parse_delete_bound(settings.repair_max_deletes)
            )
        if args.sweep and sweep is not None:
            _print_sweep(await sweep.run(fresh=args.fresh, force=args.force), app.name, args.json)
        if args.once:
            while await verifier.step():
                pass
            return verifier.stats
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        between = None if every is None or sweep is None else sweep.when_due
        runner = asyncio.create_task(verifier.run(stop, between=between))
        while not runner.done():
            await asyncio.wait([runner], timeout=args.report_every)
            _print(verifier.stats, app.name, args.json)
        await runner
        return verifier.stats
    finally:
        if server is not None:
            await server.cleanup()
        if announcer is not None:
            await announcer.close()
        wal.close()
        await checkpoints.close()
        if index is not None:
            await index.close()
        await store.close()


def _print(stats: Any, app: str, as_json: bool) -> None:
    if as_json:
        print_json({"app": app, **stats.to_dict()})
        return
    d = stats.to_dict()
    found = ", ".join(f"{c} {n}" for c, n in d["divergent"].items() if n) or "none"
    p50, p99 = d["lag_p50_seconds"], d["lag_p99_seconds"]
    lag = "-" if p50 is None else f"p50 {p50:.1f}s p99 {p99:.1f}s"
    print(f"{app}: {d['verified']} documents verified from {d['entries']} entries; divergent: {found}; "
          f"repaired {sum(d['repaired'].values())}, parked {sum(d['parked'].values())}, "
          f"refused {sum(d['refused'].values())}; write to verification {lag}", flush=True)  # fmt: skip


def _print_sweep(report: Any, app: str, as_json: bool) -> None:
    d = report.to_dict()
    if as_json:
        print_json({"app": app, "sweep": d})
        return
    found = ", ".join(f"{c} {n}" for c, n in d["divergent"].items() if n) or "none"
    print(f"{app}: full sweep of {d['documents']} documents ({d['index_read']} index documents, "
          f"{d['rows_read']} rows read) in {d['finished_at'] - d['started_at']:.1f}s: "
          f"{d['buckets_differing']} of {d['buckets']} buckets differed, {d['verified_in_full']} "
          f"documents verified in full; divergent: {found}; repaired {sum(d['repaired'].values())}, "
          f"parked {sum(d['parked'].values())}, refused {sum(d['refused'].values())}",
          flush=True)  # fmt: skip


def exit_code(stats: Any) -> int:
    """``--once``'s status: 1 when it parked a divergence or the index refused a repair, else 0."""
    return 1 if sum(stats.parked.values()) or sum(stats.refused.values()) else 0


def _run(args: argparse.Namespace) -> int:
    from framework.core.repair_guard import RepairRefused

    app = app_declaring(args.app, "notifications", "notifications=True")
    try:
        settings = settings_of(args, app.name)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    with contextlib.suppress(KeyboardInterrupt):
        try:
            stats = asyncio.run(_verify(args, app, settings))
        except RepairRefused as exc:
            raise UserError(str(exc)) from None
        _print(stats, app.name, args.json)
        return exit_code(stats)
    return 130


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge verify`` to the ``converge`` parser."""
    from framework.notifications.reader import DEFAULT_SETTLE

    p = sub.add_parser(
        "verify",
        help="verify every change of the store against the index, and repair what differs",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        parents=[
            store_flag("store URL (default: wide.db in the data dir)"),
            data_dir_flag(),
            index_flags("index URL (default: the app's settings)"),
            checkpoints_flag(),
            json_flag("print the summaries as JSON"),
        ],
    )
    p.add_argument("--app", required=True, metavar="MODULE:ATTR", help="the converge App")
    p.add_argument("--settle", type=parse_duration, default=DEFAULT_SETTLE,
                   help=f"verify a change once it is this old, longer than the projector's lag "
                        f"({DURATION_HELP}; default {DEFAULT_SETTLE:g}s)")  # fmt: skip
    p.add_argument("--recheck", type=parse_duration, default=5.0,
                   help=f"look at a difference again after this long before repairing it "
                        f"({DURATION_HELP}; default 5s)")  # fmt: skip
    p.add_argument("--once", action="store_true", help="verify what has settled, then exit")
    p.add_argument("--sweep", action="store_true",
                   help="first sweep every view in full (only the documents whose digests moved are "
                        "built: framework.verify.sweep)")  # fmt: skip
    p.add_argument("--fresh", action="store_true",
                   help="with --sweep: ignore the record of verified documents and verify every one "
                        "in full (after a projection's code changed)")  # fmt: skip
    p.add_argument("--sweep-every", type=parse_duration, default=None, metavar="DURATION",
                   help=f"sweep every view in full this often while running, the first at the start "
                        f"({DURATION_HELP})")  # fmt: skip
    p.add_argument("--report-every", type=parse_duration, default=60.0,
                   help=f"summary interval ({DURATION_HELP})")  # fmt: skip
    p.add_argument("--dlq-root", type=Path, default=None, help="where unrepairable divergences are parked")
    p.add_argument("--max-deletes", dest="repair_max_deletes", default=None, metavar="LIMITS",
                   help="the most documents of a view a sweep may delete: a count, a percentage of the "
                        "view's documents or both, the smaller applies, or none (env "
                        "CONVERGE_REPAIR_MAX_DELETES, default 10%%,1000)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="let the --sweep at the start pass --max-deletes")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve the metrics at http://127.0.0.1:PORT/metrics (0: a free port)")  # fmt: skip
    p.set_defaults(func=_run)
