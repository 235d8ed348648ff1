"""``converge demo``: a command plugin (entry point ``converge.commands``: ``demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _demo(args: argparse.Namespace) -> int:
    from examples.demo import run_demo

    return run_demo(
        events=args.events,
        seed=args.seed,
        wide_store=args.wide_store,
        workdir=args.workdir,
        workers=args.workers,
        chart=args.chart,
    )


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the ``demo`` command to the ``converge`` subparsers."""
    demo = sub.add_parser("demo", help="run the demo pipeline on the embedded stack and check convergence")
    demo.add_argument("--events", type=int, default=50_000, help="events to produce (default 50000)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--workers", type=int, default=2, help="worker processes in the consumer group (default 2)"
    )
    demo.add_argument(
        "--wide-store",
        default="sqlite",
        help="wide-column store: 'sqlite' (default) or cassandra://HOST:PORT/KEYSPACE",
    )
    demo.add_argument("--workdir", type=Path, default=None, help="keep data here (default: a temp dir)")
    demo.add_argument(
        "--chart",
        type=Path,
        default=Path("converge-demo-aggregates.png"),
        help="draw the aggregates beside the oracle's into this PNG (default converge-demo-aggregates.png)",
    )
    demo.set_defaults(func=_demo)
