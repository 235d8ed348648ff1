"""``converge stack``: start, stop or inspect the embedded local stack (noida-db)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from framework.cli.common import CliParser, UserError, add_json_flag, print_json

if TYPE_CHECKING:
    from framework.local_stack import StackInfo

__all__ = ["register", "DEFAULT_STACK_DIR"]

DEFAULT_STACK_DIR = Path(".converge/stack")


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


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge stack`` and its actions."""
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
