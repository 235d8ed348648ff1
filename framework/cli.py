"""The ``converge`` command line.

``build_parser`` registers the built-in commands (``converge --help`` lists them, with the
plugins). Plugins: every entry point of the group ``converge.commands`` names a
``register(subparsers)`` function (this project registers ``spark`` and
``demo``); a plugin that fails to load costs one warning line, not the CLI.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from framework.cli_support import (
    CliParser,
    UserError,
    add_json_flag,
    leaf_prog,
    load_spec,
    one_line,
    print_json,
    run_command,
)
from framework.worker.heap import GC_MODES

if TYPE_CHECKING:
    from framework.local_stack import StackInfo

__all__ = ["main", "build_parser", "PLUGIN_GROUP"]

DEFAULT_STACK_DIR = Path(".converge/stack")
#: Entry-point group of command plugins: ``name = "module:register"``.
PLUGIN_GROUP = "converge.commands"
#: ``converge worker`` flags, each the ``framework.settings.Settings`` field of the same name.
WORKER_SETTINGS = ("app_id", "broker", "data_dir", "wide_store", "es_url", "es_tombstones", "partitions")


def _stack_info(info: StackInfo) -> dict[str, object]:
    return {"running": True, **vars(info), "kafka": info.kafka_bootstrap, "es_url": info.es_url}


def _stack_up(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    running = LocalStack.read_state(args.data_dir)
    if running is not None:
        print(f"already running: pid {running.pid}, kafka {running.kafka_bootstrap}, es {running.es_url}")
        return 0
    info = LocalStack(
        args.data_dir, host=args.host, kafka_port=args.kafka_port, es_port=args.es_port, detach=True
    ).start()
    print(f"started: pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}")
    return 0


def _stack_down(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    stopped = LocalStack.stop_detached(args.data_dir)
    print("stopped" if stopped else "not running")
    return 0


def _stack_restart(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack, LocalStackError

    try:
        info = LocalStack.restart_detached(args.data_dir)
    except LocalStackError as exc:
        raise UserError(str(exc)) from None
    print(f"restarted: pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}")
    return 0


def _stack_status(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    info = LocalStack.read_state(args.data_dir)
    if args.json:
        print_json({"running": False} if info is None else _stack_info(info))
    elif info is None:
        print("not running")
    else:
        print(f"running: pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}")
    return 1 if info is None else 0


def _stack_env(args: argparse.Namespace) -> int:
    """Shell exports of the running stack's settings (``eval "$(converge stack env)"``)."""
    from framework.local_stack import LocalStack
    from framework.settings import ENV

    info = LocalStack.read_state(args.data_dir)
    if info is None:
        raise UserError(f"no stack runs from {args.data_dir} (start one with: converge stack up)")
    env = {
        ENV["broker"]: f"kafka://{info.kafka_bootstrap}",
        ENV["es_url"]: info.es_url,
        ENV["es_tombstones"]: "document",  # noida-db keeps no delete tombstones
    }
    if args.json:
        print_json(env)
    else:
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}")
    return 0


def _worker(args: argparse.Namespace) -> int:
    """Run the app with the flags as settings (over ``CONVERGE_*``); the cwd is importable."""
    import os

    import faust

    from framework.app import App
    from framework.settings import ENV, Settings
    from framework.worker.loading import load_app
    from framework.worker.run import run_worker, use_event_loop

    flags = {name: getattr(args, name) for name in WORKER_SETTINGS}
    for name, value in flags.items():
        if value is not None:  # for the app's own Settings.resolve and for plain Faust apps
            os.environ[ENV[name]] = str(value)
    try:
        Settings.resolve("-")  # malformed values (partitions, tombstones) fail here, named
    except ValueError as exc:
        raise UserError(str(exc)) from None
    gc_mode = args.gc or os.environ.get("CONVERGE_GC") or "freeze"
    if gc_mode not in GC_MODES:
        raise UserError(f"CONVERGE_GC: one of {', '.join(GC_MODES)}, not {gc_mode!r}")
    obj = load_spec(args.app, "app")  # a missing module or attribute is a one-line error
    if not isinstance(obj, App | faust.App) and not callable(obj):
        raise UserError(f"{args.app} is neither a converge App nor a faust.App (got {type(obj).__name__})")
    use_event_loop(args.loop or os.environ.get("CONVERGE_LOOP", "uvloop"))  # before the app binds one
    run_worker(load_app(args.app), loglevel=args.loglevel, gc_mode=gc_mode)
    return 0  # pragma: no cover - run_worker exits


def _add_stack(sub: argparse._SubParsersAction[CliParser]) -> None:
    stack = sub.add_parser("stack", help="start, stop or inspect the embedded local stack (noida-db)")
    actions = stack.add_subparsers(dest="stack_command", metavar="ACTION", required=True)
    for name, fn, text in (
        ("up", _stack_up, "start noida-db (Kafka + Elasticsearch) in the background"),
        ("down", _stack_down, "stop it with SIGINT"),
        ("restart", _stack_restart, "stop it and start it again on the same ports with its data"),
        ("status", _stack_status, "print where it listens; exit 1 when not running"),
        ("env", _stack_env, 'print its settings as shell exports: eval "$(converge stack env)"'),
    ):
        p = actions.add_parser(name, help=text)
        p.add_argument(
            "--data-dir", type=Path, default=DEFAULT_STACK_DIR, help=f"default {DEFAULT_STACK_DIR}"
        )
        if name == "up":
            p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
            p.add_argument("--kafka-port", type=int, default=None, help="default: a free port")
            p.add_argument("--es-port", type=int, default=None, help="default: a free port")
        if name in ("status", "env"):
            add_json_flag(p, "print JSON")
        p.set_defaults(func=fn)


def _add_worker(sub: argparse._SubParsersAction[CliParser]) -> None:
    worker = sub.add_parser(
        "worker",
        help="run a converge app as a Faust worker",
        description="Run MODULE:ATTR (a converge App, a faust.App, or a function returning one) as a "
        "worker. The working directory is importable. Each flag overrides its CONVERGE_* variable.",
    )
    worker.add_argument("app", metavar="MODULE:ATTR", help="e.g. mypkg.app:app")
    worker.add_argument("--app-id", default=None, help="app id / consumer group (env CONVERGE_APP_ID)")
    worker.add_argument("--broker", default=None, help="kafka://HOST:PORT (env CONVERGE_BROKER)")
    worker.add_argument("--data-dir", default=None, help="this worker's own data dir (env CONVERGE_DATA_DIR)")
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
        "frozen out of collections and young collections are rarer, see framework/worker/heap.py)",
    )
    worker.set_defaults(func=_worker)


def _add_plugins(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Register every ``converge.commands`` entry point; a broken one prints one warning line."""
    from importlib.metadata import entry_points

    seen: set[str] = set()
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        if ep.name in seen:
            continue
        seen.add(ep.name)
        try:
            ep.load()(sub)
        except Exception as exc:  # noqa: BLE001 - a plugin must not break the other commands
            print(f"converge: warning: command {ep.name!r} ({ep.value}) not loaded: {one_line(exc)}",
                  file=sys.stderr)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand (built-in and plugins)."""
    from framework.delivery.cli import register as register_delivery
    from framework.dlq.cli import register as register_dlq
    from framework.erasure.cli import register as register_erase
    from framework.idmutation.cli import register as register_idmap
    from framework.jobs.coordinator_cli import register as register_jobs
    from framework.metrics.cli import register as register_status
    from framework.notifications.cli import register as register_changes
    from framework.retention.cli import register as register_retention

    parser = CliParser(
        prog="converge",
        description="Stream processing for mutable activity data: ordered, at least once, convergent.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_stack(sub)
    _add_worker(sub)
    register_delivery(sub)
    register_dlq(sub)
    register_status(sub)
    register_jobs(sub)
    register_changes(sub)
    register_erase(sub)
    register_retention(sub)
    register_idmap(sub)
    _add_plugins(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``converge`` console script: the command's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0 if args.command is None else 2
    return run_command(func, args, leaf_prog(parser, argv))


if __name__ == "__main__":
    sys.exit(main())
