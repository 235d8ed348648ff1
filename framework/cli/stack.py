"""``converge stack``: start, stop or inspect the embedded local stack (noida-db, and moto's S3
server for parked segments when moto is installed)."""

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
    out: dict[str, object] = {
        "running": True,
        **vars(info),
        "kafka": info.kafka_bootstrap,
        "es_url": info.es_url,
    }
    if info.s3_endpoint is not None:
        from framework.local_s3 import DLQ_BUCKET

        out |= {"s3_url": info.s3_endpoint, "s3_bucket": DLQ_BUCKET}
    if info.registry_url is not None:
        out["registry_url"] = info.registry_url
    return out


def _where(info: StackInfo) -> str:
    """Where the stack listens, for one line of output."""
    where = f"pid {info.pid}, kafka {info.kafka_bootstrap}, es {info.es_url}"
    if info.registry_url is not None:
        where += f", schema registry {info.registry_url} (a stand-in)"
    if info.s3_endpoint is None:
        return where
    from framework.local_s3 import DLQ_BUCKET

    return f"{where}, s3 {info.s3_endpoint} (bucket {DLQ_BUCKET}, in memory: lost at stack down)"


def _stack_up(args: argparse.Namespace) -> int:
    from framework.local_s3 import available
    from framework.local_stack import LocalStack

    running = LocalStack.read_state(args.data_dir)
    if running is not None:
        print(f"already running: {_where(running)}")
        return _spark_up(args)
    s3 = not args.no_s3 and available()
    info = LocalStack(
        args.data_dir, host=args.host, kafka_port=args.kafka_port, es_port=args.es_port, detach=True,
        s3=s3, s3_port=args.s3_port, registry=not args.no_registry, registry_port=args.registry_port,
    ).start()  # fmt: skip
    print(f"started: {_where(info)}")
    if not s3 and not args.no_s3:
        print("no S3 server: moto is not installed (pip install 'converge[stack]')")
    return _spark_up(args)


def _spark_up(args: argparse.Namespace) -> int:
    """With ``--spark``: the local Spark standalone cluster (``framework.local_spark``) in
    ``DATA_DIR/spark``, unless it runs."""
    if not args.spark:
        return 0
    from framework.local_spark import LocalSpark, LocalSparkError

    info = LocalSpark.read_state(args.data_dir / "spark")
    if info is not None:
        print(f"spark already running: {info.master_url} (web UI http://{info.host}:{info.webui_port})")
        return 0
    try:
        info = LocalSpark(
            args.data_dir / "spark", host=args.host, workers=args.spark_workers, detach=True
        ).start()
    except LocalSparkError as exc:
        raise UserError(str(exc)) from None
    print(
        f"spark: {info.master_url}, {len(info.worker_pids)} workers (web UI http://{info.host}:{info.webui_port})"
    )
    return 0


def _stack_down(args: argparse.Namespace) -> int:
    from framework.local_spark import LocalSpark
    from framework.local_stack import LocalStack

    if LocalSpark.stop_detached(args.data_dir / "spark"):
        print("spark stopped")
    stopped = LocalStack.stop_detached(args.data_dir)
    print("stopped" if stopped else "not running")
    return 0


def _stack_restart(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack, LocalStackError

    try:
        info = LocalStack.restart_detached(args.data_dir)
    except LocalStackError as exc:
        raise UserError(str(exc)) from None
    print(f"restarted: {_where(info)}")
    return 0


def _stack_status(args: argparse.Namespace) -> int:
    from framework.local_stack import LocalStack

    info = LocalStack.read_state(args.data_dir)
    if args.json:
        print_json({"running": False} if info is None else _stack_info(info))
    elif info is None:
        print("not running")
    else:
        print(f"running: {_where(info)}")
    return 1 if info is None else 0


def _stack_env(args: argparse.Namespace) -> int:
    """Shell exports of the running stack's settings (``eval "$(converge stack env)"``)."""
    from framework.local_s3 import dlq_env
    from framework.local_spark import LocalSpark, driver_conf
    from framework.local_stack import LocalStack
    from framework.settings import ENV

    info = LocalStack.read_state(args.data_dir)
    if info is None:
        raise UserError(f"no stack runs from {args.data_dir} (start one with: converge stack up)")
    env = {
        ENV["broker"]: f"kafka://{info.kafka_bootstrap}",
        ENV["es_url"]: info.es_url,
        ENV["es_tombstones"]: "document",  # noida-db keeps no delete tombstones
        ENV["denylist_store"]: info.denylist_store,
    }
    if info.s3_endpoint is not None:
        env |= dlq_env(info.s3_endpoint, args.dlq_prefix)
    spark = LocalSpark.read_state(args.data_dir / "spark")
    if spark is not None:
        env[ENV["spark_master"]] = spark.master_url
        env["SPARK_CONF_DIR"] = str(driver_conf(spark.data_dir))
    if args.json:
        print_json(env)
    else:
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}")
    return 0


def register(sub: argparse._SubParsersAction[CliParser]) -> None:
    """Add ``converge stack`` and its actions."""
    stack = sub.add_parser(
        "stack", help="start, stop or inspect the embedded local stack (noida-db, moto's S3 server)"
    )
    actions = stack.add_subparsers(dest="stack_command", metavar="ACTION", required=True)
    for name, fn, text in (
        ("up", _stack_up, "start noida-db (Kafka + Elasticsearch) and the S3 server in the background"),
        ("down", _stack_down, "stop them (SIGINT; the S3 server's objects are lost), and Spark"),
        ("restart", _stack_restart, "stop noida-db and start it again on the same ports with its data"),
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
            p.add_argument("--s3-port", type=int, default=None, help="default: a free port")
            p.add_argument("--no-s3", action="store_true", help="start no S3 server")
            p.add_argument("--spark", action="store_true", help="also a Spark standalone master and workers")
            p.add_argument("--spark-workers", type=int, default=2, help="with --spark (default 2)")
            p.add_argument("--registry-port", type=int, default=None, help="default: a free port")
            p.add_argument(
                "--no-registry",
                action="store_true",
                help="start no schema-registry stand-in (framework.decoders)",
            )
        if name == "env":
            p.add_argument(
                "--dlq-prefix",
                default="",
                metavar="PREFIX",
                help="parked segments go to s3://converge-dlq/PREFIX (default: the bucket's top); "
                "give each app sharing the stack its own, e.g. its app id",
            )
        if name in ("status", "env"):
            add_json_flag(p, "print JSON")
        p.set_defaults(func=fn)
