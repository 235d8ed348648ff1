"""The ``converge`` command line: one module per command, named as the command.

``build_parser`` registers the built-in commands (``stack``, ``worker``, ``delivery``, ``dlq``,
``status``, ``jobs``, ``changes``, ``verify``, ``erase``, ``retention``, ``idmap``, ``query``,
``spark``), then
the plugins: every entry point of the group ``converge.commands`` names a ``register(subparsers)``
function (this project registers ``demo`` from ``examples``); a plugin that fails to load costs
one warning line, not the CLI. ``framework.cli.common`` holds what the commands share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from framework.cli import (
    changes,
    delivery,
    dlq,
    erase,
    idmap,
    jobs,
    query,
    retention,
    spark,
    stack,
    status,
    verify,
    worker,
)
from framework.cli.common import CliParser, leaf_prog, one_line, run_command

__all__ = ["main", "build_parser", "PLUGIN_GROUP", "COMMANDS"]

#: Entry-point group of command plugins: ``name = "module:register"``.
PLUGIN_GROUP = "converge.commands"
#: The built-in commands' modules, in the order ``converge --help`` lists them.
COMMANDS = (
    stack, worker, delivery, dlq, status, jobs, changes, verify, erase, retention, idmap, query, spark,
)  # fmt: skip


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
    parser = CliParser(
        prog="converge",
        description="Stream processing for mutable activity data: ordered, at least once, convergent.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
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
