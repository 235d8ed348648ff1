"""The Faust app a worker runs: ``ConvergeFaustApp`` (start and stop hooks) and ``create_faust_app``
(configured for the runtime's manual, ordered acknowledgement)."""

from __future__ import annotations

import logging
from typing import Any

import faust

from framework.runtime.handover import HandoverTransport, is_kafka_url
from framework.runtime.log_noise import quiet_rebalance_commits
from framework.settings import Settings

__all__ = ["ConvergeFaustApp", "create_faust_app"]

log = logging.getLogger(__name__)


class ConvergeFaustApp(faust.App):
    """A ``faust.App`` with hooks: ``starting`` runs before the consumer and agents start,
    ``stopped`` after they stopped. ``converge`` is the app's wiring (``framework.worker.wiring.Wiring``:
    resources, runtimes, ``status()``) when built by ``build_worker``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starting: list[Any] = []
        self.stopped: list[Any] = []
        self.converge: Any = None

    def _new_transport(self) -> Any:
        """Kafka brokers get ``HandoverTransport``: Faust's, whose consumer hands the runtimes'
        messages straight to them (``framework.runtime.handover``)."""
        urls = self.conf.broker_consumer
        if is_kafka_url(urls[0]):
            return HandoverTransport(urls, self)
        return super()._new_transport()

    async def on_start(self) -> None:
        await super().on_start()
        for hook in self.starting:
            await hook()

    async def on_shutdown(self) -> None:
        for hook in reversed(self.stopped):
            try:
                await hook()
            except Exception:  # noqa: BLE001 - shutting down: log and go on closing the rest
                log.exception("error while closing %r", hook)
        await super().on_shutdown()


def create_faust_app(settings: Settings, **overrides: object) -> ConvergeFaustApp:
    """A ``faust.App`` configured for manual, ordered acknowledgement.

    - commits every second from acks the runtime gives in offset order;
    - ``stream_wait_empty`` off: shutdown and revocation never wait on a
      blocked key; unacknowledged work is redelivered from the last commit;
    - producer batches expire after 30 s, not Faust's 20 minutes: every revocation and
      the shutdown flush the producer, and a batch the broker never takes would stall
      them, and with them the whole consumer group, that long; an expired send fails its
      sink call, which is retried;
    - tables in RocksDB (rocksdict) under the worker's own data dir;
    - the web server off unless ``web_port`` is set (then bound to 127.0.0.1);
    - the commit failures a rebalance causes said once at INFO (``runtime.log_noise``).
    """
    quiet_rebalance_commits()
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    conf: dict[str, object] = {
        "broker": settings.broker,
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
        "producer_request_timeout": 30.0,
        "web_enabled": settings.web_port is not None,
        "web_host": "127.0.0.1",
        "web_port": settings.web_port or 6066,
        "web_bind": "127.0.0.1",
    }
    conf.update(overrides)
    return ConvergeFaustApp(settings.app_id, **conf)
