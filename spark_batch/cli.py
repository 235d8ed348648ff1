"""``converge spark``: backfill, convergence check (with repair) and reindex on PySpark."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["register", "absolute_store_url"]

_ENV_STORE, _ENV_ES, _ENV_TOMBSTONES = "CONVERGE_WIDE_STORE", "CONVERGE_ES_URL", "CONVERGE_ES_TOMBSTONES"


def absolute_store_url(url: str) -> str:
    """``url`` with a relative SQLite path made absolute (executors may run elsewhere)."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
    return url


def _setup(args: argparse.Namespace, name: str) -> Any:
    from spark_batch.session import spark_session

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(name)s %(message)s"
        )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark_session(f"converge-{name}", args.master)


def _opts(args: argparse.Namespace) -> Any:
    from spark_batch.io import WriteOptions

    return WriteOptions(batch_size=args.batch_size, concurrency=args.concurrency, retries=args.retries)


def _backfill(args: argparse.Namespace) -> int:
    from spark_batch.backfill import backfill
    from spark_batch.progress import JobProgress
    from spark_batch.report import console, print_backfill, write_json

    spark = _setup(args, "backfill")
    with JobProgress(spark.sparkContext, "backfill") as progress:
        report = backfill(
            spark,
            args.paths,
            absolute_store_url(args.store),
            fmt=args.format,
            partitions=args.partitions,
            agents=args.agents,
            router=args.router,
            es_url=args.es_url if args.project else None,
            alias=args.alias,
            tombstones=args.tombstones,
            opts=_opts(args),
            progress=progress,
            dlq_root=args.dlq_root,
        )
    print_backfill(console(), report)
    if args.report:
        write_json(args.report, report.to_dict())
    return 0 if not report.rejected else 1


def _check(args: argparse.Namespace) -> int:
    from spark_batch.convergence import check, repair
    from spark_batch.progress import JobProgress
    from spark_batch.report import console, print_check, write_json
    from spark_batch.session import parallelism

    if not (args.store or args.store_parquet) or not (args.es_url or args.index_parquet):
        raise SystemExit(
            "converge spark check: give --store (or --store-parquet) and --es-url (or --index-parquet)"
        )
    if args.repair and (args.store is None or args.es_url is None):
        raise SystemExit("converge spark check: --repair needs --store and --es-url (not Parquet inputs)")
    spark = _setup(args, "check")
    store = absolute_store_url(args.store) if args.store else None
    shards, slices = parallelism(spark, args.shards), parallelism(spark, args.slices)
    kw = dict(
        alias=args.alias,
        store_url=None if args.store_parquet else store,
        store_parquet=args.store_parquet,
        es_url=None if args.index_parquet else args.es_url,
        index_parquet=args.index_parquet,
        tombstones=args.tombstones,
        shards=shards,
        slices=slices,
        sample=args.sample,
        page_size=args.page_size,
    )
    con = console()
    out: dict[str, Any] = {}
    with JobProgress(spark.sparkContext, "check") as progress:
        run = check(spark, progress=progress, **kw)  # type: ignore[arg-type]
        try:
            if args.keys_out:
                run.divergent.write.mode("overwrite").parquet(args.keys_out)
            if args.repair and not run.report.clean:
                repair(
                    spark,
                    run,
                    store_url=store,
                    es_url=args.es_url,
                    tombstones=args.tombstones,  # type: ignore[arg-type]
                    partitions=shards,
                    opts=_opts(args),
                    progress=progress,
                )
        finally:
            run.release()
        out["check"] = run.report.to_dict()
        print_check(con, run.report)
        final = run.report
        if run.report.repair is not None:
            again = check(spark, progress=progress, **kw)  # type: ignore[arg-type]
            again.release()
            out["after_repair"] = again.report.to_dict()
            print_check(con, again.report, "after repair")
            final = again.report
    if args.report:
        write_json(args.report, out)
    return 0 if final.clean else 1


def _reindex(args: argparse.Namespace) -> int:
    from agents.projection import INDEX_MAPPINGS
    from spark_batch.progress import JobProgress
    from spark_batch.reindex import reindex
    from spark_batch.report import console, print_reindex, write_json
    from spark_batch.session import parallelism

    mappings = json.loads(Path(args.mappings).read_text()) if args.mappings else INDEX_MAPPINGS
    spark = _setup(args, "reindex")
    with JobProgress(spark.sparkContext, "reindex") as progress:
        try:
            report = reindex(
                spark,
                store_url=absolute_store_url(args.store),
                es_url=args.es_url,
                alias=args.alias,
                mappings=mappings,
                tombstones=args.tombstones,
                shards=parallelism(spark, args.shards),
                drop_old=args.drop_old,
                opts=_opts(args),
                progress=progress,
            )
        except ValueError as exc:  # no alias to reindex
            raise SystemExit(f"converge spark reindex: {exc}") from None
    print_reindex(console(), report)
    if args.report:
        write_json(args.report, report.to_dict())
    return 0


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--master", default=None, help="Spark master (env CONVERGE_SPARK_MASTER, default local[2])"
    )
    p.add_argument("--es-url", default=os.environ.get(_ENV_ES), help=f"Elasticsearch URL (env {_ENV_ES})")
    p.add_argument("--alias", default="activities", help="index alias (default: activities)")
    p.add_argument(
        "--tombstones",
        choices=("native", "document"),
        default=os.environ.get(_ENV_TOMBSTONES, "native"),
        help=f"delete mode of the index: document on noida-db (env {_ENV_TOMBSTONES})",
    )
    p.add_argument("--batch-size", type=int, default=500, help="writes per batch (default 500)")
    p.add_argument("--concurrency", type=int, default=4, help="batches in flight per task (default 4)")
    p.add_argument("--retries", type=int, default=8, help="retries of a transient failure (default 8)")
    p.add_argument("--report", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--quiet", action="store_true", help="log warnings only")
    return p


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``fn`` with store failures (unreachable index or store) as a one-line exit message."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from stores.errors import StoreError

        try:
            return fn(args)
        except StoreError as exc:
            raise SystemExit(f"converge spark {args.spark_command}: {exc}") from None

    return run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``spark`` command group to the ``converge`` subparsers."""
    common = _common()
    store_help = f"wide-column store: sqlite:///PATH or cassandra://HOST/KEYSPACE (env {_ENV_STORE})"
    spark = sub.add_parser("spark", help="batch jobs on Spark: backfill, convergence check, reindex")
    cmds = spark.add_subparsers(dest="spark_command", metavar="JOB", required=True)

    p = cmds.add_parser("backfill", parents=[common], help="apply archived events through the agents")
    p.add_argument("paths", nargs="+", help="JSON-lines or Parquet files, directories or globs")
    p.add_argument(
        "--store", default=os.environ.get(_ENV_STORE), required=_ENV_STORE not in os.environ, help=store_help
    )
    p.add_argument("--format", choices=("auto", "jsonl", "parquet"), default="auto")
    p.add_argument(
        "--partitions", type=int, default=None, help="repartition the input (default: file splits)"
    )
    p.add_argument("--agents", default="agents:reference_agents", help="MODULE:FACTORY of the agents")
    p.add_argument("--router", default="agents.event_types:topic_of", help="MODULE:FUNC event type -> topic")
    p.add_argument("--project", action="store_true", help="then project the touched rows into --es-url")
    p.add_argument(
        "--dlq-root",
        type=Path,
        default=Path(os.environ.get("CONVERGE_DLQ_ROOT", ".converge/dlq")),
        help="dead-letter WAL for rejected events (env CONVERGE_DLQ_ROOT, default .converge/dlq)",
    )
    p.set_defaults(func=_guarded(_backfill))

    p = cmds.add_parser("check", parents=[common], help="compare rows with their index documents")
    p.add_argument("--store", default=os.environ.get(_ENV_STORE), help=store_help)
    p.add_argument("--store-parquet", default=None, help="row records exported to Parquet instead of --store")
    p.add_argument("--index-parquet", default=None, help="documents exported to Parquet instead of --es-url")
    p.add_argument("--shards", type=int, default=None, help="store scan shards (default: parallelism)")
    p.add_argument("--slices", type=int, default=None, help="index scan slices (default: parallelism)")
    p.add_argument("--page-size", type=int, default=10_000, help="index scan page size (default 10000)")
    p.add_argument("--sample", type=int, default=10, help="sample keys per category (default 10)")
    p.add_argument("--keys-out", default=None, help="write every divergent key to this Parquet directory")
    p.add_argument("--repair", action="store_true", help="re-project divergent rows, then check again")
    p.set_defaults(func=_guarded(_check))

    p = cmds.add_parser("reindex", parents=[common], help="build the next index generation, swap the alias")
    p.add_argument(
        "--store", default=os.environ.get(_ENV_STORE), required=_ENV_STORE not in os.environ, help=store_help
    )
    p.add_argument(
        "--mappings", default=None, help="JSON file of the new index's mappings (default: built-in)"
    )
    p.add_argument("--shards", type=int, default=None, help="store scan shards (default: parallelism)")
    p.add_argument("--drop-old", action="store_true", help="delete the old index after the swap")
    p.set_defaults(func=_guarded(_reindex))
