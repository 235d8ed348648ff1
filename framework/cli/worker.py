"""``converge worker``: run a converge app (or a plain Faust app) as a Faust worker."""

from __future__ import annotations

import argparse

from framework.cli.common import CliParser, UserError, load_spec
from framework.worker.heap import GC_MODES

__all__ = ["register", "WORKER_SETTINGS"]

#: ``converge worker`` flags, each the ``framework.settings.Settings`` field of the same name.
WORKER_SETTINGS = ("app_id", "broker", "data_dir", "wide_store", "es_url", "es_tombstones", "partitions")


def _worker(args: argparse.Namespace) -> int:
    """Run the app with the flags as settings (over ``CONVERGE_*``); the cwd is importable."""
    import os  # the flags are written into the environment, for the app's own Settings.resolve

    import faust

    from framework.app import App
    from framework.settings import ENV, Settings
    from framework.worker.loading import load_app
    from framework.worker.run import run_worker, use_event_loop

    flags = {name: getattr(args, name) for name in WORKER_SETTINGS}
    for name, value in flags.items():
        if value is not None:  # for the app's own Settings.resolve and for plain Faust apps
            os.environ[ENV[name]] = str(value)
    try:  # malformed values (partitions, tombstones) fail here, named
        settings = Settings.resolve("-", gc=args.gc, loop=args.loop)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    gc_mode = settings.gc
    if gc_mode not in GC_MODES:
        raise UserError(f"{ENV['gc']}: one of {', '.join(GC_MODES)}, not {gc_mode!r}")
    obj = load_spec(args.app, "app")  # a missing module or attribute is a one-line error
    if not isinstance(obj, App | faust.App) and not callable(obj):
        raise UserError(f"{args.app} is neither a converge App nor a faust.App (got {type(obj).__name__})")
    use_event_loop(settings.loop)  # before the app binds one
    run_worker(load_app(args.app), loglevel=args.loglevel, gc_mode=gc_mode)
    return 0  # pragma: no cover - run_worker exits


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge worker``."""
    worker = sub.add_parser(
        "worker",
        help="run a converge app as a Faust worker",
        description="Run MODULE:ATTR (a converge App, a faust.App, or a function returning one) as a "
        "worker. The working directory is importable. Each flag overrides its CONVERGE_* variable.",
    )
    worker.add_argument("app", metavar="MODULE:ATTR", help="e.g. mypkg.app:app")
    worker.add_argument("--app-id", default=None, help="app id / consumer group (env CONVERGE_APP_ID)")
    worker.add_argument("--broker", default=None, help="kafka://HOST:PORT (env CONVERGE_BROKER)")
    worker.add_argument(
        "--data-dir",
        default=None,
        help="this worker's own data dir, default var/<app id>; a SQLite store defaults to wide.db there: "
        "give the app's other commands the same --data-dir or --wide-store (env CONVERGE_DATA_DIR)",
    )
    worker.add_argument("--wide-store", default=None, help="sqlite:///PATH or cassandra://HOST:PORT/KEYSPACE")
    worker.add_argument(
        "--es-url", default=None, help="http://HOST:PORT of Elasticsearch (env CONVERGE_ES_URL)"
    )
    worker.add_argument("--es-tombstones", choices=("native", "document"), default=None,
                        help="document for an index without delete tombstones, like noida-db")  # fmt: skip
    worker.add_argument("--partitions", type=int, default=None, help="partitions of the topics it creates")
    worker.add_argument("--loglevel", default="warning")
    worker.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default=None,
        help="event loop (env CONVERGE_LOOP, default uvloop: about 20%% more events/s, see BENCHMARKS.md)",
    )
    worker.add_argument(
        "--gc",
        choices=GC_MODES,
        default=None,
        help="garbage collector (env CONVERGE_GC, default freeze: once started, the start-up heap is "
        "frozen out of collections and a young collection waits for a million net allocations, "
        "see framework/worker/heap.py)",
    )
    worker.set_defaults(func=_worker)
