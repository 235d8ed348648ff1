"""``converge delivery``: verify (retry, checkpoint), failed (undelivered messages), report (counts, PNG)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from framework.cli.common import (
    CliParser,
    UserError,
    add_json_flag,
    checkpoints_flag,
    checkpoints_url,
    env_store_flag,
    load_spec,
    print_json,
    window_flags,
)
from framework.settings import ENV, env_setting

__all__ = ["register"]


def _micros(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1_000_000)


def _iso(micros: int) -> str:
    return dt.datetime.fromtimestamp(micros / 1e6, dt.UTC).isoformat(timespec="seconds")


async def _open_store(url: str) -> Any:
    from stores.open import open_wide_store, sqlite_path

    if url.startswith("sqlite:"):
        try:
            path = sqlite_path(url)
        except ValueError as exc:
            raise UserError(f"--wide-store: {exc}") from None
        if not path.exists():
            raise UserError(f"--wide-store: {path} does not exist")
    try:
        return await open_wide_store(url)
    except ValueError as exc:
        raise UserError(f"--wide-store: {exc}") from None


async def _open_ledger(args: argparse.Namespace) -> Any:
    from framework.core.schema import SchemaError
    from framework.delivery.ledger import DeliveryLedger
    from framework.delivery.model import LedgerConfig

    store = await _open_store(args.wide_store)
    try:
        consumers = args.consumers
        if not consumers:
            try:
                columns = store.schema(args.table).columns
            except SchemaError:
                raise UserError(
                    f"no ledger table {args.table!r} in {args.wide_store}; pass --consumers"
                ) from None
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
    except BaseException:
        await store.close()
        raise
    return ledger


def _beside_store(args: argparse.Namespace, value: str | Path | None, flag: str, name: str) -> Path:
    """``value``, else ``name`` next to a SQLite store's file; UserError for another store."""
    if value is not None:
        return Path(value)
    if not args.wide_store.startswith("sqlite:"):
        raise UserError(f"give {flag}: there is no default beside {args.wide_store}")
    from stores.open import sqlite_path

    return sqlite_path(args.wide_store).parent / name


def _load_refetch(spec: str | None) -> Callable[..., Awaitable[Any]] | None:
    if spec is None:
        return None
    fn = load_spec(spec, "--refetch")
    if not callable(fn):
        raise UserError(f"--refetch {spec} is not callable")
    return fn


async def _verify(args: argparse.Namespace) -> int:
    from framework.coordination import open_checkpoint_store
    from framework.delivery.kafka_io import RecordFetcher, RecordPublisher
    from framework.delivery.verifier import Verifier, VerifierConfig
    from framework.dlq import DeadLetterWAL

    refetch = _load_refetch(args.refetch)
    cp_url = checkpoints_url(args.wide_store, args.checkpoints)
    dlq_root = _beside_store(args, args.dlq_root, "--dlq-root", "delivery-dlq")
    ledger = await _open_ledger(args)
    try:
        checkpoints = await asyncio.to_thread(open_checkpoint_store, cp_url)
    except BaseException:
        await ledger.store.close()
        raise
    failed = DeadLetterWAL(dlq_root)
    publisher, fetcher = RecordPublisher(args.broker), RecordFetcher(args.broker)
    try:
        config = VerifierConfig(grace_seconds=args.grace_minutes * 60, max_retries=args.max_retries)
        verifier = Verifier(
            ledger,
            checkpoints,
            publisher,
            fetcher=fetcher,
            refetch=refetch,
            dlq=failed,
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
        print_json({
            "checkpoint_before": result.checkpoint_before, "checkpoint_after": result.checkpoint_after,
            "buckets": len(result.buckets), "retried": result.retried, "given_up": result.given_up,
            "errors": result.errors,
        })  # fmt: skip
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
            ledger, consumer=args.consumer, source=args.source, since=_micros(args.since),
            until=_micros(args.until),
        )  # fmt: skip
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
        print_json(rows)
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
        report = await build_report(
            ledger, since=_micros(args.since), until=_micros(args.until), source=args.source
        )
    finally:
        await ledger.store.close()
    png = write_chart(report, args.png)
    if args.json:
        buckets = {str(b): vars(c) for b, c in report.buckets.items()}
        print_json({"buckets": buckets, "total": vars(report.total), "chart": str(png)})
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
        except DeliveryError as exc:  # a consumer, message id or ledger setting the user gave
            raise UserError(str(exc)) from None

    return run


def _consumers(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _ledger() -> CliParser:
    """The flags naming the ledger (every action's)."""
    p = CliParser(add_help=False, parents=[env_store_flag("store holding the ledger")])
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
    add_json_flag(p)
    return p


def _window() -> CliParser:
    """The filters of ``failed`` and ``report``."""
    p = CliParser(add_help=False, parents=[window_flags("captured")])
    p.add_argument("--source", default=None, help="only this data source")
    return p


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add the ``delivery`` command group to the ``converge`` parser."""
    group = sub.add_parser("delivery", help="end-to-end delivery verification: verify, failed, report")
    actions = group.add_subparsers(dest="delivery_command", metavar="ACTION")

    def show_help(_args: argparse.Namespace) -> int:
        group.print_help()
        return 2

    group.set_defaults(func=show_help)

    ledger, window = _ledger(), _window()
    verify = actions.add_parser(
        "verify",
        help="retry unacknowledged messages of complete buckets, checkpoint",
        parents=[ledger, checkpoints_flag()],
    )
    verify.add_argument("--broker", default=env_setting("broker") or "127.0.0.1:9092",
                        help=f"HOST:PORT or kafka://HOST:PORT (env {ENV['broker']})")  # fmt: skip
    verify.add_argument("--grace-minutes", type=int, default=10, help="wait after a bucket ends (default 10)")
    verify.add_argument("--max-retries", type=int, default=3)
    verify.add_argument(
        "--refetch", default=None, help="MODULE:ATTR: async (LedgerEntry) -> Refetched | None"
    )
    verify.add_argument(
        "--dlq-root",
        type=Path,
        default=None,
        help="WAL of given-up messages (default: delivery-dlq beside a SQLite store)",
    )
    verify.set_defaults(func=_runner(_verify))

    failed = actions.add_parser(
        "failed",
        help="list messages not delivered to at least one consumer",
        parents=[ledger, window],
    )
    failed.add_argument("--consumer", default=None, help="only messages this consumer has not acknowledged")
    failed.set_defaults(func=_runner(_failed))

    report = actions.add_parser(
        "report", help="counts per bucket and in total, and a PNG chart", parents=[ledger, window]
    )
    report.add_argument("--png", type=Path, default=Path("delivery-report.png"), help="chart path")
    report.set_defaults(func=_runner(_report))
