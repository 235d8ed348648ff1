"""``converge spark``: backfill, convergence check (with repair), reindex and aggregates, on PySpark.

Every job takes ``--app MODULE:ATTR`` (a converge ``App``) and works on its
projections (``--projection`` picks one) or aggregates (``--aggregate``).
Where the jobs connect comes from ``framework.Settings``: the flags, else the
``CONVERGE_*`` environment, else the app's defaults. Everything the driver can check (the app, the
projection, the store's tables, the index alias, the input paths) is
checked before Spark starts; a problem ends the job with one line on stderr
and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from framework.cli.common import UserError, checkpoints_flag, turn_flags

__all__ = ["register"]

#: The jobs' default checkpoint and lock file (the embedded stack's).
_JOBS_DB = ".converge/jobs.db"


def _setup(args: argparse.Namespace, name: str, *, short: bool = False) -> Any:
    from spark_batch.session import spark_session

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(name)s %(message)s"
        )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark_session(f"converge-{name}", args.master, short=short, app=args.app)


def _opts(args: argparse.Namespace) -> Any:
    from spark_batch.io import WriteOptions

    return WriteOptions(batch_size=args.batch_size, concurrency=args.concurrency, retries=args.retries)


def _backfill(args: argparse.Namespace) -> int:
    from spark_batch.backfill import backfill, prepare
    from spark_batch.preflight import Job
    from spark_batch.progress import JobProgress
    from spark_batch.report import console, print_backfill, write_json

    job = Job(args, need_projection=args.project or args.projection is not None)
    job.require_inputs(args.paths)
    es_url = job.es_url() if args.project else None
    opts = _opts(args)
    kw = dict(projection=args.projection, es_url=es_url, alias=args.alias, tombstones=job.tombstones,
              denylist_store=args.denylist_store)  # fmt: skip
    prepare(args.app, job.store, **kw)
    spark = _setup(args, "backfill")
    with JobProgress(spark.sparkContext, "backfill") as progress:
        report = backfill(
            spark,
            args.paths,
            job.store,
            app=args.app,
            **kw,
            fmt=args.format,
            partitions=args.partitions,
            opts=opts,
            progress=progress,
            dlq_root=job.settings.dlq_root,
            broker=args.broker or job.settings.broker,
        )
    print_backfill(console(), report)
    if args.report:
        write_json(args.report, report.to_dict())
    return 0 if not report.rejected else 1


def _check(args: argparse.Namespace) -> int:
    from spark_batch.apps import JobError
    from spark_batch.convergence import check, repair, repair_refusal, require_source
    from spark_batch.preflight import SHORT_INPUT_BYTES, Job, input_bytes
    from spark_batch.progress import JobProgress
    from spark_batch.report import console, print_check, write_json
    from spark_batch.session import parallelism

    projections, aggregates = _checked_views(args)
    job = Job(args, need_projection=projections, single=projections and args.index_parquet is not None)
    if args.repair and (args.store_parquet or args.index_parquet):
        raise JobError("--repair needs the live store and index, not Parquet inputs")
    bound = _delete_bound(args, job)
    if projections and args.store_parquet is None and args.index_parquet is None:
        for p in job.projections:  # before Spark: a store that is not the index's source refuses
            require_source(job.store, job.es_url(), job.tombstones, job.alias(p))
    if projections and args.store_parquet is None:
        job.require_tables()
    if projections and args.index_parquet is None:
        job.require_aliases()
    if aggregates:
        _require_aggregates(job, aggregates, create=False)
    opts = _opts(args)
    store = None if args.store_parquet else job.store
    size = input_bytes(store, args.store_parquet, args.index_parquet)
    spark = _setup(args, "check", short=size is not None and size <= SHORT_INPUT_BYTES)
    shards, slices = parallelism(spark, args.shards), parallelism(spark, args.slices)
    con = console()
    out: dict[str, Any] = {}
    clean = True
    if aggregates:
        clean = _aggregates(
            args, job, spark, aggregates, out, repair=args.repair, shards=shards, sample=args.sample
        )
    with JobProgress(spark.sparkContext, "check") as progress:
        for p in job.projections:
            kw = dict(
                app=args.app,
                projection=p.name,
                alias=job.alias(p),
                store_url=None if args.store_parquet else job.store,
                store_parquet=args.store_parquet,
                es_url=None if args.index_parquet else job.es_url(),
                index_parquet=args.index_parquet,
                tombstones=job.tombstones,
                shards=shards,
                slices=slices,
                sample=args.sample,
                page_size=args.page_size,
            )
            run = check(spark, progress=progress, **kw)
            try:
                if args.keys_out:
                    where = args.keys_out if len(job.projections) == 1 else f"{args.keys_out}/{p.name}"
                    run.divergent.write.mode("overwrite").parquet(where)
                refusal = repair_refusal(run.report, bound) if args.repair and not args.force else None
                if refusal is not None:
                    print_check(con, run.report)
                    raise JobError(refusal)
                if args.repair and not run.report.clean:
                    repair(
                        spark,
                        run,
                        store_url=job.store,
                        es_url=job.es_url(),
                        tombstones=job.tombstones,
                        partitions=shards,
                        opts=opts,
                        progress=progress,
                    )
            finally:
                run.release()
            result: dict[str, Any] = {"check": run.report.to_dict()}
            print_check(con, run.report)
            final = run.report
            if run.report.repair is not None:
                again = check(spark, progress=progress, **kw)
                again.release()
                result["after_repair"] = again.report.to_dict()
                print_check(con, again.report, "after repair")
                final = again.report
            out[p.name] = result
            clean = clean and final.clean
    if args.report:
        write_json(args.report, out)
    return 0 if clean else 1


def _delete_bound(args: argparse.Namespace, job: Any) -> Any:
    """The bound on a repair's deletions: ``--max-deletes``, else the ``repair_max_deletes`` setting."""
    from framework.core.repair_guard import parse_delete_bound
    from spark_batch.apps import JobError

    text = args.max_deletes or job.settings.repair_max_deletes
    try:
        return parse_delete_bound(text)
    except ValueError as exc:
        raise JobError(f"--max-deletes: {exc}") from None


def _checked_views(args: argparse.Namespace) -> tuple[bool, tuple[Any, ...]]:
    """Whether ``check`` compares projections, and the aggregates it compares: ``--projection`` (or
    ``--alias``) only that projection, ``--aggregate`` only that aggregate, else all of both
    (aggregates only against the live store)."""
    from spark_batch.aggregates import select_aggregates
    from spark_batch.apps import JobError, load_app

    app = load_app(args.app)
    if args.aggregate is not None:
        return False, select_aggregates(args.app, args.aggregate)
    projections = bool(app.projections) or args.projection is not None
    parquet = args.store_parquet or args.index_parquet
    one_projection = args.projection is not None or args.alias is not None
    aggregates = () if one_projection or parquet else app.aggregates
    if not projections and not aggregates:
        raise JobError(f"app {app.name!r} declares no projection or aggregate")
    return projections, aggregates


def _require_aggregates(job: Any, aggregates: tuple[Any, ...], *, create: bool) -> None:
    """The store holds the aggregates' source tables and (``create``: now) their own."""
    from framework.core.sync import run_sync
    from spark_batch.aggregates import require_aggregate_tables
    from spark_batch.apps import require_tables

    run_sync(require_tables(job.store, aggregates))
    run_sync(require_aggregate_tables(job.store, aggregates, create=create))


def _aggregates(
    args: argparse.Namespace, job: Any, spark: Any, aggregates: tuple[Any, ...], out: dict[str, Any],
    *, repair: bool, shards: int, sample: int = 10,
) -> bool:  # fmt: skip
    """Compare each aggregate with its tables (``repair``: then fix what differs and compare again);
    print and add each report to ``out``; True when all end clean."""
    from framework.core.sync import run_sync
    from spark_batch.aggregate_check import check
    from spark_batch.aggregate_repair import group_ends
    from spark_batch.aggregate_repair import repair as fix
    from spark_batch.report import console, print_aggregate

    con, clean = console(), True
    for a in aggregates:
        run = check(spark, app=args.app, name=a.name, store_url=job.store, shards=shards, sample=sample)
        try:
            if repair and not run.report.clean:
                ends = run_sync(group_ends(args.broker or job.settings.broker, job.app.group_topic(a)))
                fix(spark, run, store_url=job.store, ends=ends, partitions=shards, opts=_opts(args))
        finally:
            run.release()
        print_aggregate(con, run.report)
        result: dict[str, Any] = {"check": run.report.to_dict()}
        final = run.report
        if run.report.repair is not None:
            again = check(spark, app=args.app, name=a.name, store_url=job.store, shards=shards, sample=sample)
            again.release()
            print_aggregate(con, again.report, "after repair")
            result["after_repair"] = again.report.to_dict()
            final = again.report
        out[a.name] = result
        clean = clean and final.clean
    return clean


def _aggregate(args: argparse.Namespace) -> int:
    from spark_batch.aggregates import aggregate, select_aggregates
    from spark_batch.preflight import Job
    from spark_batch.report import console, print_aggregate, write_json
    from spark_batch.session import parallelism

    job = Job(args, need_projection=False)
    aggregates = select_aggregates(args.app, args.aggregate)
    _require_aggregates(job, aggregates, create=args.write)
    spark = _setup(args, "aggregate")
    shards = parallelism(spark, args.shards)
    out: dict[str, Any] = {}
    if args.write:
        clean = _aggregates(args, job, spark, aggregates, out, repair=True, shards=shards)
    else:
        clean, con = True, console()
        for a in aggregates:
            report = aggregate(spark, app=args.app, name=a.name, store_url=job.store, shards=shards)
            print_aggregate(con, report)
            out[a.name] = report.to_dict()
    if args.report:
        write_json(args.report, out)
    return 0 if clean else 1


def _reindex(args: argparse.Namespace) -> int:
    from spark_batch.apps import JobError
    from spark_batch.preflight import Job
    from spark_batch.progress import JobProgress
    from spark_batch.reindex import reindex
    from spark_batch.report import console, print_reindex, write_json
    from spark_batch.session import parallelism

    job = Job(args, need_projection=True, single=True)
    mappings = None
    if args.mappings:
        try:
            mappings = json.loads(Path(args.mappings).read_text())
        except (OSError, ValueError) as exc:
            raise JobError(f"--mappings {args.mappings}: {exc}") from None
    job.require_tables()
    job.require_aliases()
    spark = _setup(args, "reindex")
    with JobProgress(spark.sparkContext, "reindex") as progress:
        report = reindex(
            spark,
            app=args.app,
            projection=job.projections[0].name,
            store_url=job.store,
            es_url=job.es_url(),
            alias=job.alias(job.projections[0]),
            mappings=mappings,
            tombstones=job.tombstones,
            shards=parallelism(spark, args.shards),
            drop_old=args.drop_old,
            opts=_opts(args),
            progress=progress,
        )
    print_reindex(console(), report)
    if args.report:
        write_json(args.report, report.to_dict())
    return 0


def _crash_hook(args: argparse.Namespace) -> Any:
    """The fault tests' hook (hidden ``--crash-after PROCESS[@BATCH]``), else None."""
    if args.crash_after is None:
        return None
    from framework.testing.faults import kill_after

    return kill_after(args.crash_after)


def _ingest(args: argparse.Namespace) -> int:
    from framework.coordination import CheckpointError, CheckpointUnavailable, open_checkpoint_store
    from framework.settings import env_setting
    from spark_batch.apps import JobError, load_app
    from spark_batch.ingest import app_topics, ingest, prepare_ingest, print_run
    from spark_batch.ingest_processes import IngestConfig
    from spark_batch.preflight import Job, absolute_store_url
    from spark_batch.report import console, write_json

    indexed = bool(args.es_url or env_setting("es_url")) and bool(load_app(args.app).projections)
    job = Job(args, need_projection=indexed)
    es_url, projections = job.settings.es_url, job.projections
    cfg = IngestConfig(
        app=args.app,
        broker=args.broker or job.settings.broker,
        store_url=job.store,
        job=args.job or f"ingest-{job.app.name}",
        es_url=es_url,
        tombstones=job.tombstones,
        aliases={p.name: job.alias(p) for p in projections},
        opts=_opts(args),
        split=args.split,
        dlq_root=str(job.settings.dlq_root),
    )
    url = args.checkpoints or f"sqlite:///{_JOBS_DB}"
    try:
        checkpoints = open_checkpoint_store(absolute_store_url(url))
    except (CheckpointError, CheckpointUnavailable) as exc:
        raise JobError(f"checkpoint store {url}: {exc}") from None
    try:
        prepare_ingest(cfg, projection=args.projection, alias=args.alias, denylist_store=args.denylist_store)
        spark = _setup(args, "ingest")
        run = ingest(
            spark, cfg, checkpoints, topics=args.topic or app_topics(args.app), max_offsets=args.max_offsets,
            max_batches=args.max_batches, apply_log=args.apply_log,
            notifications=False if args.no_notifications else None, after_process=_crash_hook(args),
        )  # fmt: skip
    finally:
        checkpoints.close_sync()
    print_run(console(), run)
    if args.report:
        write_json(args.report, run.to_dict())
    return 0


@contextlib.contextmanager
def _coordinated(args: argparse.Namespace, declared: str, name: str) -> Iterator[_JobParts]:
    """A coordinated job's parts (``--app`` must declare ``declared``): the app, the index to
    re-project into (required when the app has projections), the checkpoint store, the job locks,
    the Spark session and the clock; the stores are closed afterwards."""
    import time

    from framework.coordination import open_checkpoint_store
    from framework.coordination.open import DEFAULT_JOB_LOCKS_URL, open_domain_locks
    from framework.settings import env_setting
    from spark_batch.apps import JobError
    from spark_batch.preflight import Job, absolute_store_url
    from stores.open import open_search_index

    job = Job(args, need_projection=False)
    if getattr(job.app, declared) is None:
        raise JobError(f"--app {args.app}: the app declares no {declared}")
    es_url = job.settings.es_url
    if job.app.projections and es_url is None:
        raise JobError(
            "--es-url: the app has projections: give the index their documents are re-projected into"
        )
    index = None if es_url is None else functools.partial(open_search_index, es_url, job.tombstones)
    checkpoints = open_checkpoint_store(absolute_store_url(args.checkpoints))
    locks = open_domain_locks(
        absolute_store_url(args.locks or (env_setting("job_locks") or DEFAULT_JOB_LOCKS_URL))
    )
    try:
        clock = time.time if args.now is None else (lambda: args.now)
        yield _JobParts(job, index, checkpoints, locks, _setup(args, name), clock)
    finally:
        checkpoints.close_sync()
        locks.close()


class _JobParts(NamedTuple):
    job: Any
    index: Any
    checkpoints: Any
    locks: Any
    spark: Any
    clock: Callable[[], float]


def _reported(args: argparse.Namespace, run: Any, print_run: Callable[[Any], None]) -> int:
    """Print a coordinated run, write its ``--report``; exit 3 when it was not the job's turn."""
    from spark_batch.report import write_json

    print_run(run)
    if args.report:
        write_json(args.report, run.to_dict())
    return 0 if not run.skipped else 3


def _retention(args: argparse.Namespace) -> int:
    from framework.cli.retention import print_run
    from spark_batch.retention import spark_retention

    with _coordinated(args, "retention", "retention") as c:
        run = spark_retention(
            c.spark, args.app, c.job.store, checkpoints=c.checkpoints, locks=c.locks, index=c.index,
            predecessor=args.predecessor, start_with=args.start_with, shards=args.shards, clock=c.clock,
            settings=c.job.settings,
        )  # fmt: skip
    return _reported(args, run, print_run)


def _idmap(args: argparse.Namespace) -> int:
    from framework.cli.idmap import print_run
    from spark_batch.id_mutation import spark_id_mutation

    with _coordinated(args, "id_mutation", "idmap") as c:
        run = spark_id_mutation(
            c.spark, args.app, c.job.store, checkpoints=c.checkpoints, locks=c.locks,
            broker=args.broker or c.job.settings.broker, index=c.index,
            dlq_root=str(args.dlq_root or c.job.settings.dlq_root), predecessor=args.predecessor,
            start_with=args.start_with, until_idle=args.until_idle, shards=args.shards,
            settle=args.settle, clock=c.clock,
        )  # fmt: skip
    return _reported(args, run, print_run)


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--app", required=True, metavar="MODULE:ATTR", help="the converge App to run")
    p.add_argument(
        "--projection", default=None, help="the app projection (name or alias) to work on (default: all)"
    )
    p.add_argument(
        "--master", default=None, help="Spark master (env CONVERGE_SPARK_MASTER, default local[2])"
    )
    p.add_argument(
        "--shared-store",
        action="store_true",
        help="every executor of a cluster sees the SQLite store at this path (else a cluster refuses "
        "it; env CONVERGE_SHARED_PATHS: the shared directories)",
    )
    p.add_argument(
        "--wide-store",
        "--store",
        dest="store",
        default=None,
        help="wide-column store: sqlite:///PATH or cassandra://HOST/KEYSPACE "
        "(env CONVERGE_WIDE_STORE, default wide.db in the data dir)",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="the app's data dir, as the worker's --data-dir: its SQLite store is wide.db there "
        "(env CONVERGE_DATA_DIR, default var/<app id>)",
    )
    p.add_argument("--es-url", default=None, help="Elasticsearch URL (env CONVERGE_ES_URL)")
    p.add_argument(
        "--alias", default=None, help="index alias instead of the projection's (one projection only)"
    )
    p.add_argument(
        "--es-tombstones",
        "--tombstones",
        dest="tombstones",
        choices=("native", "document"),
        default=None,
        help="delete mode of the index: document on noida-db (env CONVERGE_ES_TOMBSTONES, default native)",
    )
    p.add_argument("--batch-size", type=int, default=500, help="writes per batch (default 500)")
    p.add_argument("--concurrency", type=int, default=4, help="batches in flight per task (default 4)")
    p.add_argument("--retries", type=int, default=8, help="retries of a transient failure (default 8)")
    p.add_argument("--report", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--quiet", action="store_true", help="log warnings only")
    return p


def _aggregate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--aggregate", default=None, help="the app aggregate to work on (default: all)")
    p.add_argument(
        "--broker",
        default=None,
        help="Kafka broker whose group topic ends version repaired totals (env CONVERGE_BROKER)",
    )


def _repair_bound_flags(p: argparse.ArgumentParser) -> None:
    from framework.core.repair_guard import DEFAULT_MAX_DELETES

    p.add_argument(
        "--max-deletes",
        default=None,
        metavar="LIMITS",
        help="the most index documents a repair may delete: a count, a percentage of the index or "
        "both, the smaller applies, or none "
        f"(env CONVERGE_REPAIR_MAX_DELETES, default {DEFAULT_MAX_DELETES.replace('%', '%%')})",
    )
    p.add_argument("--force", action="store_true", help="repair even beyond --max-deletes")


def _job_checkpoints() -> argparse.ArgumentParser:
    return checkpoints_flag("job checkpoint store URL", default=f"sqlite:///{_JOBS_DB}")


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``fn`` with the jobs' ``JobError`` and ``RangeError`` as the CLI's ``UserError``: one line on
    stderr, exit status 2 (``converge`` prints store failures, e.g. an unreachable index, as one line too)."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from framework.core.repair_guard import RepairRefused
        from framework.jobs.kafka_ranges import RangeError
        from spark_batch.apps import JobError

        try:
            return fn(args)
        except (JobError, RangeError, RepairRefused) as exc:
            raise UserError(" ".join(str(exc).split())) from None

    return run


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the ``spark`` command group to the ``converge`` subparsers."""
    common = _common()
    spark = sub.add_parser(
        "spark", help="batch jobs on Spark: backfill, convergence check, reindex, ingest, aggregates"
    )
    cmds = spark.add_subparsers(dest="spark_command", metavar="JOB", required=True)

    p = cmds.add_parser("backfill", parents=[common], help="apply archived events through the app's agents")
    p.add_argument("paths", nargs="+", help="JSON-lines or Parquet files, directories or globs")
    p.add_argument(
        "--format",
        choices=("auto", "jsonl", "parquet", "records"),
        default="auto",
        help="jsonl/parquet: converge's envelopes; records: raw Kafka records in the source's own "
        "format (JSON lines, framework.decoders.record_to_json), decoded by the agent consuming each "
        "record's topic; auto: parquet for .parquet, records for names with '.records.', else jsonl",
    )
    p.add_argument(
        "--partitions", type=int, default=None, help="repartition the input (default: file splits)"
    )
    p.add_argument(
        "--project",
        action="store_true",
        help="then project the touched partitions into --es-url, and the aggregates into their tables",
    )
    p.add_argument(
        "--broker",
        default=None,
        help="Kafka broker whose group topic ends version the aggregates' totals, with --project "
        "(env CONVERGE_BROKER)",
    )
    p.add_argument(
        "--dlq-root",
        type=Path,
        default=None,
        help="dead-letter WAL for rejected events (env CONVERGE_DLQ_ROOT, default var/<app>/dlq)",
    )
    p.add_argument(
        "--denylist-store",
        default=None,
        help="store holding the erasure deny-list of record, when it is not the target "
        "(env CONVERGE_DENYLIST_STORE; the target's own URL accepts a fresh store as the record)",
    )
    p.set_defaults(func=_guarded(_backfill))

    p = cmds.add_parser("check", parents=[common], help="compare the store with the projections' documents")
    p.add_argument("--store-parquet", default=None, help="row records exported to Parquet instead of --store")
    p.add_argument(
        "--index-parquet",
        default=None,
        help="documents exported to Parquet instead of --es-url (one projection)",
    )
    p.add_argument("--shards", type=int, default=None, help="store scan shards (default: parallelism)")
    p.add_argument("--slices", type=int, default=None, help="index scan slices (default: parallelism)")
    p.add_argument("--page-size", type=int, default=10_000, help="index scan page size (default 10000)")
    p.add_argument("--sample", type=int, default=10, help="sample keys per category (default 10)")
    p.add_argument(
        "--keys-out",
        default=None,
        help="write every divergent key to this Parquet directory (per projection)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="re-project divergent partitions and rewrite divergent aggregates, then check again "
        "(refused when the store is not the index's source, or when it would delete more than "
        "--max-deletes documents)",
    )
    _repair_bound_flags(p)
    _aggregate_flags(p)
    p.set_defaults(func=_guarded(_check))

    p = cmds.add_parser(
        "aggregate",
        parents=[common],
        help="recompute the app's aggregates from the store (--write: fix them)",
    )
    p.add_argument("--shards", type=int, default=None, help="store scan shards (default: parallelism)")
    p.add_argument(
        "--write",
        action="store_true",
        help="write the contributions and totals that differ, then check again",
    )
    _aggregate_flags(p)
    p.set_defaults(func=_guarded(_aggregate))

    p = cmds.add_parser(
        "reindex", parents=[common], help="build a projection's next index generation, swap the alias"
    )
    p.add_argument(
        "--mappings", default=None, help="JSON file of the new index's mappings (default: the projection's)"
    )
    p.add_argument("--shards", type=int, default=None, help="store scan shards (default: parallelism)")
    p.add_argument("--drop-old", action="store_true", help="delete the old index after the swap")
    p.set_defaults(func=_guarded(_reindex))

    p = cmds.add_parser(
        "retention",
        parents=[common, _job_checkpoints(), turn_flags("retention", _JOBS_DB)],
        help="the app's retention job with its store side on Spark",
    )
    p.add_argument("--shards", type=int, default=None, help="tasks per table (default: parallelism)")
    p.set_defaults(func=_guarded(_retention))

    p = cmds.add_parser(
        "idmap",
        parents=[common, _job_checkpoints(), turn_flags("id_mutation", _JOBS_DB)],
        help="the app's ID mutation job with its collapse and moves on Spark",
    )
    p.add_argument("--shards", type=int, default=None, help="tasks for the moves (default: parallelism)")
    p.add_argument("--broker", default=None, help="Kafka broker (env CONVERGE_BROKER)")
    p.add_argument("--dlq-root", type=Path, default=None, help="dead-letter WAL (env CONVERGE_DLQ_ROOT)")
    p.add_argument("--until-idle", action="store_true", help="batches until the requests topic is drained")
    p.add_argument("--settle", type=float, default=30.0, help="seconds before the sweep reads a notification")
    p.set_defaults(func=_guarded(_idmap))

    p = cmds.add_parser(
        "ingest", parents=[common], help="micro-batches of Kafka offset ranges through the app, exactly once"
    )
    p.add_argument(
        "--topic", action="append", default=None, help="a topic to read (repeat; default: the agents' topics)"
    )
    p.add_argument("--job", default=None, help="the job's checkpoint name (default ingest-<app>)")
    p.add_argument(
        "--checkpoints",
        default=None,
        help="job checkpoint store: sqlite:///PATH or zookeeper://HOSTS/ROOT (default sqlite:///.converge/jobs.db)",
    )
    p.add_argument("--broker", default=None, help="Kafka broker (env CONVERGE_BROKER)")
    p.add_argument("--max-offsets", type=int, default=None, help="offsets per partition per batch")
    p.add_argument("--max-batches", type=int, default=None, help="new batches (default: until caught up)")
    p.add_argument("--split", type=int, default=5000, help="offsets per Spark task (default 5000)")
    p.add_argument("--apply-log", default=None, help="append a JSON line per process run here")
    p.add_argument("--dlq-root", type=Path, default=None, help="dead-letter WAL (env CONVERGE_DLQ_ROOT)")
    p.add_argument("--no-notifications", action="store_true", help="no notifications process")
    p.add_argument("--crash-after", default=None, help=argparse.SUPPRESS)  # fault tests: kill_after
    p.add_argument(
        "--denylist-store",
        default=None,
        help="store holding the erasure deny-list of record, when it is not the target "
        "(env CONVERGE_DENYLIST_STORE; the target's own URL accepts a fresh store as the record)",
    )
    p.set_defaults(func=_guarded(_ingest))

    from framework.cli.spark_changes import add_changes

    add_changes(cmds, common, _guarded)
