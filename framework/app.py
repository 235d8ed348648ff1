"""The Faust app factory, with settings that serve at-least-once processing."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import faust

__all__ = ["create_app", "AppSettings"]


@dataclass(frozen=True)
class AppSettings:
    """Where a worker connects and keeps its local state.

    Each field falls back to an environment variable: CONVERGE_BROKER
    (``kafka://127.0.0.1:9092``), CONVERGE_DATA_DIR (``./var/<app id>``),
    CONVERGE_WIDE_STORE (``sqlite:///<data dir>/wide.db``), CONVERGE_ES_URL.
    """

    app_id: str
    broker: str | None = None
    data_dir: str | None = None
    wide_store: str | None = None
    es_url: str | None = None
    partitions: int = 4
    web_port: int | None = None

    def resolved_broker(self) -> str:
        b = self.broker or os.environ.get("CONVERGE_BROKER", "kafka://127.0.0.1:9092")
        return b if "://" in b else f"kafka://{b}"

    def resolved_data_dir(self) -> Path:
        return Path(self.data_dir or os.environ.get("CONVERGE_DATA_DIR") or Path("var") / self.app_id)

    def resolved_wide_store(self) -> str:
        return self.wide_store or os.environ.get("CONVERGE_WIDE_STORE") or (
            f"sqlite:///{self.resolved_data_dir() / 'wide.db'}"
        )

    def resolved_es_url(self) -> str | None:
        return self.es_url or os.environ.get("CONVERGE_ES_URL")


def create_app(settings: AppSettings, **overrides: object) -> faust.App:
    """A ``faust.App`` configured for manual, ordered acknowledgement.

    - commits every second from acks the runtime gives in offset order;
    - ``stream_wait_empty`` off: shutdown and revocation never wait on a
      blocked key; unacknowledged work is redelivered from the last commit;
    - tables in RocksDB (rocksdict) under a per-worker data dir;
    - the web server off unless ``web_port`` is set (then bound to 127.0.0.1).
    """
    data_dir = settings.resolved_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    conf: dict[str, object] = {
        "broker": settings.resolved_broker(),
        "datadir": str(data_dir / "faust"),
        "store": "rocksdb://",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": 1,
        "broker_commit_interval": 1.0,
        "broker_commit_every": 10_000,
        "stream_wait_empty": False,
        "broker_session_timeout": 30.0,
        "broker_heartbeat_interval": 3.0,
        "broker_rebalance_timeout": 60.0,
        "broker_max_poll_interval": 300.0,
        "consumer_auto_offset_reset": "earliest",
        "producer_acks": -1,
        "web_enabled": settings.web_port is not None,
        "web_host": "127.0.0.1",
        "web_port": settings.web_port or 6066,
        "web_bind": "127.0.0.1",
    }
    conf.update(overrides)
    return faust.App(settings.app_id, **conf)  # type: ignore[arg-type]
