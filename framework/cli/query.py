"""``converge query``: read an app's aggregates and entities from the store (``framework.aggregates.query``).

``converge query total AGG --group NAME=VALUE ... [--window TIME]``, ``converge query windows AGG
--group ... [--since TIME] [--until TIME]``, ``converge query top AGG --by MEASURE [--limit N]
[--window TIME]`` and ``converge query entity TABLE --key NAME=VALUE ... [--precedence
TABLE=S1,S2,...]``; each with ``--app MODULE:ATTR``, the store from ``--wide-store`` or the app's
settings, and ``--json``. ``NAME:=JSON`` gives a group value that is not a string. Bad input is one
error line and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from framework.cli.common import (
    TIME_HELP,
    CliParser,
    UserError,
    app_declaring,
    app_flag,
    json_flag,
    open_existing_store,
    print_json,
    settings_of,
    store_flag,
    time_arg,
    window_flags,
)

__all__ = ["register"]


def _iso(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _totals_table(totals: Sequence[Any], measures: Sequence[str]) -> Table:
    table = Table(box=None, pad_edge=False)
    names = list(totals[0].group) if totals else []
    windowed = bool(totals) and totals[0].window is not None
    counts = ["members", "reflects", *(["revisions"] if windowed else [])]
    heads = [*names, *(["window", "final"] if windowed else []), *measures, *counts]
    for head in heads:
        table.add_column(escape(head), justify="right" if head in (*measures, *counts) else "left")
    for t in totals:
        cells = [str(v) for v in t.group.values()]
        if windowed:
            cells += [f"{_iso(t.window)} .. {_iso(t.window_end)}", "yes" if t.final else "no"]
        cells += [f"{t.measures[m]:g}" if m in t.measures else "-" for m in measures]
        cells += [str(t.members), str(t.reflects), *([str(t.revisions)] if windowed else [])]
        table.add_row(*map(escape, cells))
    return table


def _print_entity(console: Console, entity: Any) -> None:
    key = ", ".join(f"{k}={v}" for k, v in entity.key.items())
    console.print(f"entity {escape(key)} (reflects version {entity.reflects})")
    for view, mark in entity.marks.items():
        console.print(f"  version mark of {escape(view)}: {mark}")
    for name, rows in entity.rows.items():
        console.print(f"{escape(name)}: {len(rows)} row(s)")
        if not rows:
            continue
        table = Table(box=None, pad_edge=False)
        heads = list(dict.fromkeys([*rows[0].key, *(c for r in rows for c in r.cells)]))
        for head in [*heads, "version"]:
            table.add_column(escape(head))
        for r in rows:
            values = {**r.key, **r.cells}
            table.add_row(*(escape("-" if values.get(h) is None else str(values[h])) for h in heads),
                          str(r.version))  # fmt: skip
        console.print(table)
    for name, state in entity.states.items():
        now = "none" if state is None else f"{state.state} (at {state.at}, event {state.event_id})"
        console.print(f"current state of {escape(name)}: {escape(now)}")


def _pairs(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    from framework.aggregates.query import split_pair

    return [split_pair(text, what) for text in items]


def _query(args: argparse.Namespace) -> int:
    from framework.aggregates.query import Queries, QueryError, parse_group, parse_key, parse_precedence

    app = app_declaring(args.app, "views", "projections=[...] or aggregates=[...]")
    settings = settings_of(args, app.name)
    clock = time.time if args.now is None else (lambda: float(args.now))

    async def go() -> Any:
        store = await open_existing_store(settings.wide_store)
        try:
            for schema in app.tables:
                await store.ensure_table(schema)
            q = Queries(store, app.views, clock=clock)
            if args.query == "total":
                return await q.total(args.name, parse_group(_pairs(args.group, "--group")), args.window)
            if args.query == "windows":
                group = parse_group(_pairs(args.group, "--group"))
                return await q.windows(args.name, group, args.since, args.until)
            if args.query == "top":
                return await q.top(args.name, args.by, args.limit, args.window)
            schema = q.source_table(args.name)
            key = parse_key(schema, _pairs(args.key, "--key"))
            return await q.entity(args.name, key, parse_precedence(_pairs(args.precedence, "--precedence")))
        except QueryError as exc:
            raise UserError(str(exc)) from None
        finally:
            await store.close()

    answer = asyncio.run(go())
    if args.json:
        print_json(answer.to_dict())
        return 0
    console = Console(width=None if sys.stdout.isatty() else 200)
    if args.query == "entity":
        _print_entity(console, answer)
        return 0
    measures = list(app.aggregate(args.name).measures)
    if args.query == "total":
        if not answer.found:
            console.print(f"no contributions to this group of {escape(args.name)}")
        console.print(_totals_table([answer], measures))
    elif args.query == "windows":
        console.print(f"{len(answer.windows)} window(s) of {escape(args.name)} (reflects {answer.reflects})")
        console.print(_totals_table(answer.windows, measures))
    else:
        console.print(f"top {len(answer.groups)} group(s) of {escape(args.name)} by {escape(args.by)}"
                      f" ({answer.scanned} totals rows scanned)")  # fmt: skip
        console.print(_totals_table(answer.groups, measures))
    return 0


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge query`` and its four reads."""
    common = [
        app_flag("the converge App"),
        store_flag("sqlite:///PATH or cassandra://HOST/KEYSPACE (default: the app's settings)"),
        json_flag("print the answer as JSON"),
    ]
    top = sub.add_parser(
        "query",
        help="read an aggregate's totals, windows or top groups, or one entity, from the store",
        description="Interactive queries over the store the app's workers write. Each answer carries the "
        "version it reflects and, for a windowed aggregate, whether the window is final and how many times "
        "it was revised while final.",
    )
    cmds = top.add_subparsers(dest="query", metavar="QUERY", required=True)
    group_help = (
        "a group-key value NAME=VALUE (NAME:=JSON for a number, boolean or null); one per group_by name"
    )
    total = cmds.add_parser("total", help="the totals of one group", parents=common)
    windows = cmds.add_parser("windows", help="the windows of one series in [--since, --until)",
                              parents=[*common, window_flags("windows starting")])  # fmt: skip
    best = cmds.add_parser(
        "top", help="the top N groups by a measure (scans the totals table)", parents=common
    )
    entity = cmds.add_parser("entity", help="one entity: its rows, the state of its logs", parents=common)
    for p in (total, windows, best):
        p.add_argument("name", metavar="AGGREGATE", help="the aggregate's name")
        p.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
    for p in (total, windows):
        p.add_argument("--group", action="append", default=[], metavar="NAME=VALUE", help=group_help)
    for p in (total, best):
        p.add_argument("--window", type=time_arg, default=None, help=f"a window start: {TIME_HELP}")
    best.add_argument("--by", required=True, metavar="MEASURE", help="the measure to rank groups by")
    best.add_argument("--limit", type=int, default=10, help="how many groups (default 10)")
    entity.add_argument("name", metavar="TABLE", help="a source table of a projection or aggregate")
    entity.add_argument("--key", action="append", default=[], metavar="NAME=VALUE",
                        help="a partition key value of TABLE (one per key column)")  # fmt: skip
    entity.add_argument("--precedence", action="append", default=[], metavar="TABLE=S1,S2,...",
                        help="a state log's states, lowest first (at one at, the later wins)")  # fmt: skip
    entity.set_defaults(now=None)
    for p in (total, windows, best, entity):
        p.set_defaults(func=_query)
