"""One settings object for workers, jobs and the CLI, resolved from flags and the environment.

This module is the only one that reads the environment: ``Settings.resolve`` for an app's
settings, ``env_setting`` for one setting where no app is known (a command's default).
``tests/test_settings_env.py`` fails when another module reads ``os.environ``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from framework.core.dlq_retention import DeadLetterRetention
from framework.core.durations import parse_duration
from framework.core.repair_guard import DEFAULT_MAX_DELETES, parse_delete_bound

__all__ = ["Settings", "ENV", "env_setting", "Durability"]

Tombstones = Literal["native", "document"]
Durability = Literal["local", "uploaded"]

#: Environment variable of each setting.
ENV: dict[str, str] = {
    "app_id": "CONVERGE_APP_ID",
    "broker": "CONVERGE_BROKER",
    "data_dir": "CONVERGE_DATA_DIR",
    "wide_store": "CONVERGE_WIDE_STORE",
    "store_writer": "CONVERGE_STORE_WRITER",
    "es_url": "CONVERGE_ES_URL",
    "es_tombstones": "CONVERGE_ES_TOMBSTONES",
    "partitions": "CONVERGE_PARTITIONS",
    "web_port": "CONVERGE_WEB_PORT",
    "dlq_root": "CONVERGE_DLQ_ROOT",
    "dlq_objects": "CONVERGE_DLQ_OBJECTS",
    "dlq_durability": "CONVERGE_DLQ_DURABILITY",
    "dlq_s3_endpoint": "CONVERGE_DLQ_S3_ENDPOINT",
    "dlq_s3_region": "CONVERGE_DLQ_S3_REGION",
    "dlq_s3_access_key": "CONVERGE_DLQ_S3_ACCESS_KEY",
    "dlq_s3_secret_key": "CONVERGE_DLQ_S3_SECRET_KEY",
    "dlq_retention": "CONVERGE_DLQ_RETENTION",
    "denylist_store": "CONVERGE_DENYLIST_STORE",
    "checkpoints": "CONVERGE_CHECKPOINTS",
    "job_locks": "CONVERGE_JOB_LOCKS",
    "erasure_key": "CONVERGE_ERASURE_KEY",
    "metrics_token": "CONVERGE_METRICS_TOKEN",
    "verify": "CONVERGE_VERIFY",
    "verify_sweep": "CONVERGE_VERIFY_SWEEP",
    "verify_sample": "CONVERGE_VERIFY_SAMPLE",
    "verify_record": "CONVERGE_VERIFY_RECORD",
    "repair_max_deletes": "CONVERGE_REPAIR_MAX_DELETES",
    "loglevel": "CONVERGE_LOGLEVEL",
    "loop": "CONVERGE_LOOP",
    "gc": "CONVERGE_GC",
    "spark_master": "CONVERGE_SPARK_MASTER",
    "spark_log_level": "CONVERGE_SPARK_LOG_LEVEL",
    "shared_paths": "CONVERGE_SHARED_PATHS",
    "debug": "CONVERGE_DEBUG",
}


@dataclass(frozen=True)
class Settings:
    """Where an app's worker and jobs connect and keep their local state.

    Build it with ``Settings.resolve(default_app_id, **flags)``: a flag that is
    None falls back to its environment variable (``ENV``), then to the default
    (the app id to ``default_app_id``, usually the ``App``'s name).

    - ``broker``: ``kafka://127.0.0.1:9092``
    - ``data_dir``: ``var/<app_id>`` (each worker needs its own)
    - ``wide_store``: ``sqlite:///`` + the absolute path of ``<data_dir>/wide.db``
    - ``store_writer``: ``thread``; ``process`` writes a SQLite wide store from a child process of
      the worker (``stores.sqlite.writer``), beside the worker's Python instead of taking turns
      with it, and the agents then map each micro-batch while the previous one is written: more
      CPU per event, for machines with a core free for the child (on the 2-core benchmark
      machine, with the broker on it, no faster: BENCHMARKS.md)
    - ``es_url``: none (an app with projections needs one)
    - ``es_tombstones``: ``native`` (Elasticsearch), or ``document`` for an index
      that keeps no delete tombstones (the embedded noida-db)
    - ``partitions``: 4, for the topics the app creates
    - ``web_port``: none (the worker's web server stays off)
    - ``dlq_root``: ``<data_dir>/dlq``, the dead-letter WAL
    - ``dlq_objects``: none (segments stay in ``dlq_root``); ``s3://BUCKET/PREFIX`` uploads each
      sealed segment there, tracks it and removes it locally once the upload is verified, and
      ``converge dlq`` without ``--root`` works on every host's segments there
      (``framework.dlq.offload``, ``framework.dlq.bucket``; the ``s3`` extra)
    - ``dlq_durability``: ``local``, a parked event counts as finished once fsynced in its local
      segment; ``uploaded`` (needs ``dlq_objects``) waits until its segment is uploaded, verified
      and tracked (``DeadLetterWAL``)
    - ``dlq_s3_endpoint``: none (AWS S3 itself); the URL of an S3-compatible service
    - ``dlq_s3_region``: none (``us-east-1``), the region of the bucket
    - ``dlq_s3_access_key``: none (boto3's default credentials: an instance role or its
      config files); the access key id for ``dlq_objects``
    - ``dlq_s3_secret_key``: none; the secret key for ``dlq_objects``, never printed
    - ``dlq_retention``: ``forever``; how long parked events are kept (each worker applies it hourly,
      and ``converge dlq cleanup``), per
      partition: comma-separated ``PATTERN=DURATION`` rules such as ``orders=30d,*/*/*/Timeout=7d``,
      PATTERN ``pipeline[/event_type[/stage[/error_class]]]`` with ``*`` for any part, DURATION
      like ``12h``, ``30d`` or ``forever``; the most specific matching rule wins, and a partition
      no rule matches is kept forever (``framework.core.dlq_retention``)
    - ``denylist_store``: none; the store holding the erasure deny-list of record, which every
      writer (worker, backfill, ingestion, ``dlq replay --app``) settles against before it writes;
      ``target`` names the written store itself; unset, the written store must hold an
      established deny-list (``framework.erasure.record``)
    - ``checkpoints``: none; the checkpoint store URL (``sqlite:///PATH`` or
      ``zookeeper://HOSTS/ROOT``) of ``converge changes``, ``spark changes``, ``delivery
      verify``, ``retention`` and ``idmap``, which default to ``checkpoints.db`` beside a SQLite store
    - ``job_locks``: none; the job lock URL (same forms); ``converge retention`` and ``idmap``
      default to ``jobs.db`` beside a SQLite store, ``jobs status`` and the Spark jobs to
      ``sqlite:///.converge/jobs.db``
    - ``erasure_key``: none; the secret key of the erasure deny-list's subject hashes, required
      once subjects are erased (``framework.erasure.keyed``); never printed
    - ``verify``: off; a duration (e.g. ``30s``) runs the change verifier (``framework.verify``)
      in the worker with that settle time: on one worker of an app, whose notifications are on
    - ``verify_sweep``: off; a duration (e.g. ``6h``): the worker's verifier also sweeps every view
      in full that often (``framework.verify.sweep``), the first sweep at its start
    - ``verify_sample``: ``0.01``; the fraction of changed documents the change verifier rebuilds
      from the store's rows even when the projector's record agrees (``framework.verify``)
    - ``verify_record``: on; ``0`` stops the projectors recording what they wrote for the change
      verifier (it then rebuilds every changed document)
    - ``repair_max_deletes``: ``10%,1000``; the most index documents one repair of ``converge spark
      check --repair`` or ``converge verify`` (its sweeps) may delete without ``--force``: limits,
      each a count or a percentage of the index's documents (at least 10), the smallest applies;
      ``none`` for no bound (``framework.core.repair_guard``)
    - ``metrics_token``: none; the bearer token ``converge status`` sends to a worker's metrics
    - ``loglevel``: ``warning``, of the workers ``framework.worker.processes`` spawns
    - ``loop``: ``uvloop`` (or ``asyncio``), the event loop of ``converge worker``
    - ``gc``: ``freeze``, the garbage collector mode of ``converge worker`` (``framework.worker.heap``)
    - ``spark_master``: ``local[2]``, the Spark master of the batch jobs
    - ``spark_log_level``: ``WARN``, the log level of the Spark context
    - ``shared_paths``: none; directories (``os.pathsep``-separated) every Spark executor sees at the
      same path (a shared filesystem): a SQLite store under one may serve a job on a cluster
    - ``debug``: off; ``1`` lets a command's exceptions through with their traceback
    """

    app_id: str
    broker: str
    data_dir: Path
    wide_store: str
    es_url: str | None
    es_tombstones: Tombstones
    partitions: int
    web_port: int | None
    dlq_root: Path
    dlq_objects: str | None = None
    dlq_durability: Durability = "local"
    dlq_s3_endpoint: str | None = None
    dlq_s3_region: str | None = None
    dlq_s3_access_key: str | None = dataclasses.field(default=None, repr=False)
    dlq_s3_secret_key: str | None = dataclasses.field(default=None, repr=False)
    dlq_retention: str = "forever"
    denylist_store: str | None = None
    checkpoints: str | None = None
    job_locks: str | None = None
    erasure_key: str | None = dataclasses.field(default=None, repr=False)
    metrics_token: str | None = dataclasses.field(default=None, repr=False)
    verify: float | None = None
    verify_sweep: float | None = None
    verify_sample: float = 0.01
    verify_record: bool = True
    repair_max_deletes: str = DEFAULT_MAX_DELETES
    loglevel: str = "warning"
    loop: str = "uvloop"
    gc: str = "freeze"
    spark_master: str = "local[2]"
    spark_log_level: str = "WARN"
    shared_paths: str | None = None
    store_writer: Literal["thread", "process"] = "thread"
    debug: bool = False

    @classmethod
    def resolve(
        cls, default_app_id: str | None = None, env: Mapping[str, str] | None = None, **flags: Any
    ) -> Settings:
        """Settings from ``flags`` (None = unset), then ``env`` (default ``os.environ``), then defaults.

        ValueError names the setting when a value is malformed.
        """
        env = os.environ if env is None else env
        unknown = set(flags) - set(ENV)
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")

        def get(name: str) -> Any:
            value = flags.get(name)
            return value if value is not None else (env.get(ENV[name]) or None)

        app = get("app_id") or default_app_id
        if not app:
            raise ValueError(f"no app id: give one or set {ENV['app_id']}")
        broker = str(get("broker") or "kafka://127.0.0.1:9092")
        data_dir = Path(get("data_dir") or Path("var") / app)
        tombstones = _tombstones(get("es_tombstones") or "native")
        return cls(
            app_id=str(app),
            broker=broker if "://" in broker else f"kafka://{broker}",
            data_dir=data_dir,
            wide_store=str(get("wide_store") or f"sqlite:///{(data_dir / 'wide.db').resolve()}"),
            es_url=get("es_url"),
            es_tombstones=tombstones,
            store_writer=_store_writer(get("store_writer") or "thread"),
            partitions=_int(get("partitions") or 4, "partitions", minimum=1),
            web_port=None if get("web_port") is None else _int(get("web_port"), "web_port", minimum=0),
            dlq_root=Path(get("dlq_root") or data_dir / "dlq"),
            dlq_durability=_durability(get("dlq_durability") or "local", get("dlq_objects")),
            denylist_store=get("denylist_store"),
            dlq_retention=_retention(get("dlq_retention") or "forever"),
            verify=None if get("verify") is None else _duration(get("verify"), "verify"),
            verify_sweep=None
            if get("verify_sweep") is None
            else _duration(get("verify_sweep"), "verify_sweep"),
            verify_sample=_fraction(get("verify_sample") or 0.01, "verify_sample"),
            verify_record=str(get("verify_record") or "1").strip().lower() not in ("0", "false", "off", "no"),
            repair_max_deletes=_delete_bound(get("repair_max_deletes") or DEFAULT_MAX_DELETES),
            **{name: get(name) for name in _OPTIONAL if get(name) is not None},
            debug=get("debug") in (True, "1"),
        )

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def as_env(self) -> dict[str, str]:
        """These settings as environment variables (for a spawned worker or ``stack env``)."""
        out: dict[str, str] = {}
        for name, var in ENV.items():
            value = getattr(self, name)
            if value is not None and value != _DEFAULTS.get(name):
                out[var] = "1" if value is True else str(value)
        return out

    @property
    def bootstrap(self) -> str:
        """The broker as ``host:port`` (without ``kafka://``)."""
        return self.broker.split("://", 1)[-1]


#: Settings read as given (a string), each with its fixed default (None: none).
_OPTIONAL = ("dlq_objects", "dlq_s3_endpoint", "dlq_s3_region", "dlq_s3_access_key", "dlq_s3_secret_key",
             "checkpoints", "job_locks", "erasure_key", "metrics_token", "loglevel", "loop", "gc",
             "spark_master", "spark_log_level", "shared_paths")  # fmt: skip
_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Settings) if f.default is not dataclasses.MISSING
}


def env_setting(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """Setting ``name`` from the environment alone (``env``, default ``os.environ``), else its
    fixed default; None when it has none. For a value needed where no app is known."""
    if name not in ENV:
        raise TypeError(f"unknown setting: {name!r}")
    value = (os.environ if env is None else env).get(ENV[name]) or _DEFAULTS.get(name)
    return None if value is None or value is False else str(value)


def _tombstones(value: Any) -> Tombstones:
    if value == "native":
        return "native"
    if value == "document":
        return "document"
    raise ValueError(f"es_tombstones ({ENV['es_tombstones']}): 'native' or 'document', not {value!r}")


def _retention(value: Any) -> str:
    try:
        DeadLetterRetention.parse(str(value))
    except ValueError as exc:
        raise ValueError(f"dlq_retention ({ENV['dlq_retention']}): {exc}") from None
    return str(value).strip()


def _delete_bound(value: Any) -> str:
    try:
        parse_delete_bound(str(value))
    except ValueError as exc:
        raise ValueError(f"repair_max_deletes ({ENV['repair_max_deletes']}): {exc}") from None
    return str(value).strip()


def _durability(value: Any, objects: str | None) -> Durability:
    if value not in ("local", "uploaded"):
        raise ValueError(f"dlq_durability ({ENV['dlq_durability']}): 'local' or 'uploaded', not {value!r}")
    if value == "uploaded" and objects is None:
        raise ValueError(f"dlq_durability ({ENV['dlq_durability']}): 'uploaded' needs dlq_objects "
                         f"({ENV['dlq_objects']})")  # fmt: skip
    return "uploaded" if value == "uploaded" else "local"


def _duration(value: Any, name: str) -> float:
    try:
        return parse_duration(str(value))
    except ValueError as exc:
        raise ValueError(f"{name} ({ENV[name]}): {exc}") from None


def _store_writer(value: Any) -> Literal["thread", "process"]:
    if value == "thread" or value == "process":
        return value
    raise ValueError(f"store_writer ({ENV['store_writer']}): expected thread or process, got {value!r}")


def _fraction(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} ({ENV[name]}): expected a fraction, got {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} ({ENV[name]}): must be from 0 to 1, got {number}")
    return number


def _int(value: Any, name: str, minimum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} ({ENV[name]}): expected an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} ({ENV[name]}): must be at least {minimum}, got {number}")
    return number
