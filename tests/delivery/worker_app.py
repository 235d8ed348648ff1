"""A worker app for delivery tests: an agent acking as ``search``, acks topic and HTTP, the verifier timer.

Configured by environment (set by the test that spawns it): DELIVERY_TOPIC,
DELIVERY_ACKS_TOPIC, DELIVERY_APP_ID, DELIVERY_TOKEN, DELIVERY_WEB_PORT,
CONVERGE_WIDE_STORE (``sqlite:///PATH``, shared with the test), CONVERGE_BROKER
and CONVERGE_DATA_DIR.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import faust

from framework.coordination.sqlite import SqliteCheckpointStore
from framework.core.events import Event
from framework.core.mutations import Mutation, Upsert
from framework.core.schema import Column, TableSchema
from framework.delivery.ack_agent import register_ack_agent
from framework.delivery.ack_http import mount_on_faust
from framework.delivery.acks import delivery_sinks
from framework.delivery.kafka_io import RecordFetcher, RecordPublisher
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import LedgerConfig
from framework.delivery.timer import register_verifier_timer
from framework.delivery.verifier import Verifier, VerifierConfig
from framework.dlq import DeadLetterWAL
from framework.runtime.agent import KeyedAgent
from framework.runtime.binding import AgentRuntime
from framework.runtime.processor import AgentProcessor
from framework.runtime.sinks import WideColumnSink
from framework.settings import Settings
from framework.worker.faust_app import create_faust_app
from stores.open import sqlite_path
from stores.sqlite.store import SqliteStore

HUB = TableSchema("probe_hub", (Column("id", "text"),), (Column("n", "bigint"),))
#: One-second buckets, so the in-worker verifier timer has complete buckets to walk within the test.
CONFIG = LedgerConfig(consumers=("search", "timeline"), bucket_seconds=1)


class ProbeAgent(KeyedAgent):
    """Writes one hub row per event; declares itself the ``search`` consumer of the ledger."""

    name = "delivery_probe"
    topic = os.environ.get("DELIVERY_TOPIC", "delivery-probe")
    tables = (HUB,)
    delivery_consumer = "search"

    def handle(self, event: Event) -> Iterable[Mutation]:
        return [
            Upsert("probe_hub", {"id": event.event_id}, {"n": int(event.payload.get("n", 0))}, event.version)
        ]


def build() -> faust.App:
    settings = Settings.resolve(
        os.environ.get("DELIVERY_APP_ID", "delivery-probe"), web_port=int(os.environ["DELIVERY_WEB_PORT"])
    )
    app = create_faust_app(settings)
    store = SqliteStore(sqlite_path(settings.wide_store))
    for schema in (HUB, CONFIG.ledger_schema(), CONFIG.index_schema()):
        store.engine.ensure_table(schema)  # idle store: safe to use the engine directly
    ledger = DeliveryLedger(store, CONFIG)
    failed = DeadLetterWAL(settings.dlq_root)
    agent = ProbeAgent()
    processor = AgentProcessor(agent, [WideColumnSink(store), *delivery_sinks(agent, ledger)])
    AgentRuntime(app, agent.topic, processor, failed)
    register_ack_agent(app, ledger, os.environ["DELIVERY_ACKS_TOPIC"], within=0.2, dlq=failed)
    mount_on_faust(app, ledger, token=os.environ["DELIVERY_TOKEN"])
    broker = settings.broker
    verifier = Verifier(
        ledger,
        SqliteCheckpointStore(settings.data_dir / "checkpoints.db"),
        RecordPublisher(broker),
        fetcher=RecordFetcher(broker),
        dlq=failed,
        config=VerifierConfig(grace_seconds=2, max_retries=2, lookback_seconds=60),
    )
    register_verifier_timer(app, verifier, interval=0.5)
    return app
