"""``converge status``: a running worker's metrics, summed up per runtime, and the change
verifier's (a worker's with ``CONVERGE_VERIFY``, or ``converge verify --metrics-port``'s alone)."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from framework.cli.common import CliParser, add_json_flag, print_json
from framework.metrics.summary import RuntimeSummary, fetch_metrics, metrics_url, summarize, summarize_verify
from framework.settings import ENV, env_setting

__all__ = ["register"]

#: The worker's web port setting (``framework.settings``), used for the default URL.
_PORT_ENV = ENV["web_port"]


#: The key of the change verifier's summary in ``--json`` (no runtime name has a dot).
VERIFY_KEY = "converge.verify"


def _default_url() -> str:
    return f"http://127.0.0.1:{env_setting('web_port') or 6066}"


def _table(rows: dict[str, RuntimeSummary]) -> Table:
    table = Table(box=None, pad_edge=False)
    for head in ("runtime", "partitions", "lag", "pending", "in flight", "blocked", "skipped", "paused",
                 "processed", "retried", "parked", "stalled", "stall s", "sinks down"):  # fmt: skip
        table.add_column(head, justify="left" if head in ("runtime", "sinks down") else "right")
    for r in rows.values():
        table.add_row(escape(r.runtime), *(str(n) for n in (
            r.partitions, r.lag, r.pending, r.in_flight, r.blocked_keys, r.skipped, r.paused,
            r.processed, r.retried, r.parked, r.stalled, r.stall_s)),
            escape(", ".join(r.sinks_down) or "-"))  # fmt: skip
    return table


def _status(args: argparse.Namespace) -> int:
    url = metrics_url(args.url)
    try:
        text = fetch_metrics(url, timeout=args.timeout, token=args.token)
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        hint = "is a worker running there with CONVERGE_WEB_PORT set?"
        raise OSError(f"cannot read {url}: {reason} ({hint})") from None
    rows, verify = summarize(text), summarize_verify(text)
    if args.json:
        out = {name: r.as_dict() for name, r in rows.items()}
        if verify is not None:
            out[VERIFY_KEY] = verify.as_dict()
        print_json(out)
        return 0
    console = Console(width=None if sys.stdout.isatty() else 200)
    if not rows and verify is not None:  # a verifier's own endpoint (converge verify --metrics-port)
        console.print(f"verifier metrics from {escape(url)}")
    else:
        console.print(f"worker metrics from {escape(url)}")
    if not rows and verify is None:
        console.print("no runtime reported (the worker may still be starting)")
        return 0
    if rows:
        console.print(_table(rows))
    for r in rows.values():
        for what, n in sorted(r.parked_by.items()):
            console.print(f"parked {escape(r.runtime)} {escape(what)}: {n}")
    if verify is not None:
        found = ", ".join(f"{c} {n}" for c, n in verify.divergent.items() if n) or "none"
        lag = "-" if verify.lag_p50_s is None else f"p50 {verify.lag_p50_s}s, p99 {verify.lag_p99_s}s"
        console.print(f"verify: {verify.documents} documents verified ({verify.entries} entries), behind "
                      f"{verify.behind_s if verify.behind_s is not None else '-'}s; divergences {found}; "
                      f"repaired {sum(verify.repaired.values())}, parked {sum(verify.parked.values())}, "
                      f"refused {sum(verify.refused.values())}; write to verification {lag}")  # fmt: skip
        age = "never" if verify.last_sweep_age_s is None else f"{verify.last_sweep_age_s}s ago"
        console.print(f"verify: {verify.sweeps} full sweeps since start; the last finished {age}")
    return 0


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add the ``status`` command to the ``converge`` parser."""
    p = sub.add_parser(
        "status",
        help="a running worker's lag, in-flight, blocked and parked events, sinks down (from /metrics)",
        description="Read the Prometheus metrics of a running worker (its web server: set CONVERGE_WEB_PORT "
        "when starting it) and print them per runtime.",
    )
    p.add_argument("--url", default=_default_url(),
                   help=f"the worker's web server or metrics URL (default http://127.0.0.1:${_PORT_ENV}, "
                   "else port 6066)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    p.add_argument(
        "--token",
        default=env_setting("metrics_token"),
        help="bearer token, when the endpoint requires one (env CONVERGE_METRICS_TOKEN)",
    )
    add_json_flag(p, "print JSON: the summary per runtime")
    p.set_defaults(func=_status)
