"""One settings object for workers, jobs and the CLI, resolved from flags and the environment."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["Settings", "ENV"]

Tombstones = Literal["native", "document"]

#: Environment variable of each setting.
ENV: dict[str, str] = {
    "app_id": "CONVERGE_APP_ID",
    "broker": "CONVERGE_BROKER",
    "data_dir": "CONVERGE_DATA_DIR",
    "wide_store": "CONVERGE_WIDE_STORE",
    "es_url": "CONVERGE_ES_URL",
    "es_tombstones": "CONVERGE_ES_TOMBSTONES",
    "partitions": "CONVERGE_PARTITIONS",
    "web_port": "CONVERGE_WEB_PORT",
    "dlq_root": "CONVERGE_DLQ_ROOT",
    "denylist_store": "CONVERGE_DENYLIST_STORE",
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
    - ``es_url``: none (an app with projections needs one)
    - ``es_tombstones``: ``native`` (Elasticsearch), or ``document`` for an index
      that keeps no delete tombstones (the embedded noida-db)
    - ``partitions``: 4, for the topics the app creates
    - ``web_port``: none (the worker's web server stays off)
    - ``dlq_root``: ``<data_dir>/dlq``, the dead-letter WAL
    - ``denylist_store``: none; the store holding the erasure deny-list of record, when a
      backfill or ingestion writes into another store (``framework.erasure.record``)
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
    denylist_store: str | None = None

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
            partitions=_int(get("partitions") or 4, "partitions", minimum=1),
            web_port=None if get("web_port") is None else _int(get("web_port"), "web_port", minimum=0),
            dlq_root=Path(get("dlq_root") or data_dir / "dlq"),
            denylist_store=get("denylist_store"),
        )

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def as_env(self) -> dict[str, str]:
        """These settings as environment variables (for a spawned worker or ``stack env``)."""
        out: dict[str, str] = {}
        for name, var in ENV.items():
            value = getattr(self, name)
            if value is not None:
                out[var] = str(value)
        return out

    @property
    def bootstrap(self) -> str:
        """The broker as ``host:port`` (without ``kafka://``)."""
        return self.broker.split("://", 1)[-1]


def _tombstones(value: Any) -> Tombstones:
    if value == "native":
        return "native"
    if value == "document":
        return "document"
    raise ValueError(f"es_tombstones ({ENV['es_tombstones']}): 'native' or 'document', not {value!r}")


def _int(value: Any, name: str, minimum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} ({ENV[name]}): expected an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} ({ENV[name]}): must be at least {minimum}, got {number}")
    return number
