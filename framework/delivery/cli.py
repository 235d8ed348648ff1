"""``converge delivery``: verify (retry, checkpoint), failed (undelivered messages), report (counts, PNG)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

__all__ = ["register"]

_ENV_STORE = "CONVERGE_WIDE_STORE"
_ENV_CHECKPOINTS = "CONVERGE_CHECKPOINTS"


def parse_time(text: str) -> int:
    """Microseconds since the epoch from an integer or an ISO-8601 time (naive = UTC)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time or integer microseconds: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1_000_000)


def _iso(micros: int) -> str:
    return dt.datetime.fromtimestamp(micros / 1e6, dt.UTC).isoformat(timespec="seconds")


def _sqlite_path(url: str) -> Path:
    scheme, sep, rest = url.partition("://")
    if scheme != "sqlite" or not sep or not rest:
        raise SystemExit(f"--wide-store: only sqlite:///PATH is supported by this command, got {url!r}")
    return Path(rest)


async def _open_ledger(args: argparse.Namespace) -> Any:
    from framework.core.schema import SchemaError
    from framework.delivery.ledger import DeliveryLedger
    from framework.delivery.model import LedgerConfig
    from stores.sqlite.store import SqliteStore

    path = _sqlite_path(args.wide_store)
    if not path.exists():
        raise SystemExit(f"--wide-store: {path} does not exist")
    store = await SqliteStore.open(path)
    consumers = args.consumers
    if not consumers:
        try:
            columns = store.schema(args.table).columns
        except SchemaError:
            await store.close()
            raise SystemExit(f"no ledger table {args.table!r} in {path}; pass --consumers") from None
        consumers = [c.name[4:] for c in columns if c.name.startswith("ack_")]
    config = LedgerConfig(
        consumers=tuple(consumers),
        table=args.table,
        bucket_seconds=args.bucket_minutes * 60,
        shards=args.shards,
        ttl_seconds=args.ttl_days * 86400,
    )
    ledger = DeliveryLedger(store, config)
    await ledger.ensure()
    return ledger


def _load_refetch(spec: str | None) -> Callable[..., Awaitable[Any]] | None:
    if spec is None:
        return None
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise SystemExit(f"--refetch must be MODULE:ATTR, got {spec!r}")
    fn = getattr(importlib.import_module(module), attr)
    if not callable(fn):
        raise SystemExit(f"--refetch {spec} is not callable")
    return fn


async def _verify(args: argparse.Namespace) -> int:
    from framework.coordination import open_checkpoint_store
    from framework.delivery.kafka_io import RecordFetcher, RecordPublisher
    from framework.delivery.verifier import Verifier, VerifierConfig
    from framework.parking import DeadLetterWAL

    ledger = await _open_ledger(args)
    base = _sqlite_path(args.wide_store).parent
    cp_url = args.checkpoints or os.environ.get(_ENV_CHECKPOINTS) or f"sqlite://{base / 'checkpoints.db'}"
    checkpoints = await asyncio.to_thread(open_checkpoint_store, cp_url)
    failed = DeadLetterWAL(args.dlq_root or base / "delivery-dlq")
    publisher, fetcher = RecordPublisher(args.broker), RecordFetcher(args.broker)
    try:
        config = VerifierConfig(grace_seconds=args.grace_minutes * 60, max_retries=args.max_retries)
        verifier = Verifier(
            ledger,
            checkpoints,
            publisher,
            fetcher=fetcher,
            refetch=_load_refetch(args.refetch),
            failed=failed,
            config=config,
        )
        result = await verifier.run_once()
    finally:
        await fetcher.close()
        await publisher.close()
        await checkpoints.close()
        failed.close()
        await ledger.store.close()
    if args.json:
        print(json.dumps({
            "checkpoint_before": result.checkpoint_before, "checkpoint_after": result.checkpoint_after,
            "buckets": len(result.buckets), "retried": result.retried, "given_up": result.given_up,
            "errors": result.errors,
        }))  # fmt: skip
    else:
        print(result.summary())
        for mid, reason in result.given_up:
            print(f"given up: {mid} ({reason})")
        for mid, err in result.errors:
            print(f"error: {mid}: {err}", file=sys.stderr)
    return 1 if result.errors else 0


async def _failed(args: argparse.Namespace) -> int:
    from framework.delivery.queries import failed_messages

    ledger = await _open_ledger(args)
    try:
        found = await failed_messages(
            ledger, consumer=args.consumer, source=args.source, since=args.since, until=args.until
        )
    finally:
        await ledger.store.close()
    rows: list[dict[str, Any]] = [
        {
            "message_id": m.entry.ref.message_id,
            "source": m.entry.ref.source,
            "captured_at": _iso(m.entry.ref.captured_at),
            "status": m.status,
            "missing": list(m.missing),
            "retries": m.entry.retries,
            "reason": m.entry.gave_up,
        }
        for m in found
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(
                f"{r['captured_at']}  {r['source']}  {r['message_id']}  {r['status']}"
                f"  missing={','.join(r['missing'])}  retries={r['retries']}"
            )
        print(f"{len(rows)} message(s) not delivered to every consumer")
    return 0


async def _report(args: argparse.Namespace) -> int:
    from framework.delivery.report import build_report, render_text, write_chart

    ledger = await _open_ledger(args)
    try:
        report = await build_report(ledger, since=args.since, until=args.until, source=args.source)
    finally:
        await ledger.store.close()
    png = write_chart(report, args.png)
    if args.json:
        print(
            json.dumps(
                {"buckets": {str(b): vars(c) for b, c in report.buckets.items()}, "total": vars(report.total)}
            )
        )
    else:
        print(render_text(report))
        print(f"chart: {png}")
    return 0


def _runner(
    fn: Callable[[argparse.Namespace], Coroutine[Any, Any, int]],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from framework.delivery.model import DeliveryError

        try:
            return asyncio.run(fn(args))
        except DeliveryError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


def _consumers(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wide-store",
        default=os.environ.get(_ENV_STORE),
        required=os.environ.get(_ENV_STORE) is None,
        help=f"sqlite:///PATH of the wide-column store holding the ledger (env {_ENV_STORE})",
    )
    p.add_argument("--table", default="delivery_ledger", help="ledger table (default delivery_ledger)")
    p.add_argument(
        "--consumers",
        type=_consumers,
        default=None,
        help="a,b: declared consumers (default: the stored ledger's)",
    )
    p.add_argument("--bucket-minutes", type=int, default=10, help="bucket width the ledger was written with")
    p.add_argument("--shards", type=int, default=1, help="shards per bucket the ledger was written with")
    p.add_argument("--ttl-days", type=int, default=7, help="ledger TTL (bounds the default time range)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _window(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", default=None, help="only this data source")
    p.add_argument("--since", type=parse_time, default=None, help="captured at or after (ISO-8601 UTC or µs)")
    p.add_argument("--until", type=parse_time, default=None, help="captured before (ISO-8601 UTC or µs)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``delivery`` command group to the ``converge`` parser."""
    group = sub.add_parser("delivery", help="end-to-end delivery verification: verify, failed, report")
    actions = group.add_subparsers(dest="delivery_command", metavar="ACTION")
    group.set_defaults(func=lambda _args: (group.print_help(), 2)[1])

    verify = actions.add_parser(
        "verify", help="retry unacknowledged messages of complete buckets, checkpoint"
    )
    _common(verify)
    verify.add_argument("--broker", default=os.environ.get("CONVERGE_BROKER", "127.0.0.1:9092"))
    verify.add_argument(
        "--checkpoints",
        default=None,
        help=f"sqlite:///PATH or zookeeper://HOSTS/ROOT (env {_ENV_CHECKPOINTS})",
    )
    verify.add_argument("--grace-minutes", type=int, default=10, help="wait after a bucket ends (default 10)")
    verify.add_argument("--max-retries", type=int, default=3)
    verify.add_argument(
        "--refetch", default=None, help="MODULE:ATTR: async (LedgerEntry) -> Refetched | None"
    )
    verify.add_argument("--dlq-root", type=Path, default=None, help="dead-letter WAL for given-up messages")
    verify.set_defaults(func=_runner(_verify))

    failed = actions.add_parser("failed", help="list messages not delivered to at least one consumer")
    _common(failed)
    _window(failed)
    failed.add_argument("--consumer", default=None, help="only messages this consumer has not acknowledged")
    failed.set_defaults(func=_runner(_failed))

    report = actions.add_parser("report", help="counts per bucket and in total, and a PNG chart")
    _common(report)
    _window(report)
    report.add_argument("--png", type=Path, default=Path("delivery-report.png"), help="chart path")
    report.set_defaults(func=_runner(_report))
