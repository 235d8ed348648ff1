"""The ``converge`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["main", "build_parser"]

DEFAULT_STACK_DIR = Path(".converge/stack")


def _stack_up(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    running = LocalStack.read_state(args.data_dir)
    if running is not None:
        print(f"already running: pid {running.pid}, kafka {running.kafka_bootstrap}, es {running.es_url}")
        return 0
    info = LocalStack(
        args.data_dir,
        host=args.host,
        kafka_port=args.kafka_port,
        es_port=args.es_port,
        detach=True,
    ).start()
    print(f"started: pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}")
    return 0


def _stack_down(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    stopped = LocalStack.stop_detached(args.data_dir)
    print("stopped" if stopped else "not running")
    return 0


def _stack_status(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    info = LocalStack.read_state(args.data_dir)
    if info is None:
        print("not running")
        return 1
    print(f"running: pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from examples.demo import run_demo

    return run_demo(events=args.events, seed=args.seed, wide_store=args.wide_store, workdir=args.workdir)


def _worker(args: argparse.Namespace) -> int:
    import os

    from framework.worker import load_app, run_worker

    for flag, env in (("broker", "CONVERGE_BROKER"), ("data_dir", "CONVERGE_DATA_DIR"),
                      ("wide_store", "CONVERGE_WIDE_STORE"), ("es_url", "CONVERGE_ES_URL")):
        value = getattr(args, flag)
        if value is not None:
            os.environ[env] = str(value)
    run_worker(load_app(args.app), loglevel=args.loglevel)
    return 0  # pragma: no cover


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="converge",
        description="Stream processing for mutable activity data: ordered, at least once, convergent.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    stack = sub.add_parser("stack", help="start, stop or inspect the embedded local stack (noida-db)")
    stack_sub = stack.add_subparsers(dest="stack_command", metavar="ACTION")
    for name, fn, text in (
        ("up", _stack_up, "start noida-db (Kafka + Elasticsearch) in the background"),
        ("down", _stack_down, "stop it with SIGINT"),
        ("status", _stack_status, "print where it listens; exit 1 when not running"),
    ):
        p = stack_sub.add_parser(name, help=text)
        p.add_argument("--data-dir", type=Path, default=DEFAULT_STACK_DIR)
        if name == "up":
            p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
            p.add_argument("--kafka-port", type=int, default=None, help="default: a free port")
            p.add_argument("--es-port", type=int, default=None, help="default: a free port")
        p.set_defaults(func=fn)

    worker = sub.add_parser("worker", help="run a converge app as a Faust worker")
    worker.add_argument("app", help="MODULE:ATTR of a faust.App or a factory returning one")
    worker.add_argument("--broker", default=None, help="kafka://HOST:PORT (env CONVERGE_BROKER)")
    worker.add_argument("--data-dir", default=None, help="this worker's own data dir (env CONVERGE_DATA_DIR)")
    worker.add_argument("--wide-store", default=None, help="sqlite:///PATH or cassandra://HOST:PORT/KEYSPACE")
    worker.add_argument("--es-url", default=None, help="http://HOST:PORT of Elasticsearch")
    worker.add_argument("--loglevel", default="warning")
    worker.set_defaults(func=_worker)

    demo = sub.add_parser("demo", help="run the demo pipeline on the embedded stack and check convergence")
    demo.add_argument("--events", type=int, default=50_000, help="events to produce (default 50000)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--wide-store",
        default="sqlite",
        help="wide-column store: 'sqlite' (default) or cassandra://HOST:PORT",
    )
    demo.add_argument("--workdir", type=Path, default=None, help="keep data here (default: a temp dir)")
    demo.set_defaults(func=_demo)
    from framework.delivery.cli import register as register_delivery

    register_delivery(sub)
    from framework.parking.cli import register as register_dlq

    register_dlq(sub)
    from spark_batch.cli import register as register_spark

    register_spark(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``converge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0 if args.command is None else 2
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
