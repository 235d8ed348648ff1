"""A test app whose agent declares a delivery consumer: ``App(..., delivery=LedgerConfig)``."""

from __future__ import annotations

import os
from collections.abc import Iterable

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.delivery.model import LedgerConfig

PROBE = TableSchema("probe", (Column("id", "text"),), (Column("n", "bigint"),))
LEDGER = LedgerConfig(consumers=("search", "audit"))


class ProbeAgent(KeyedAgent):
    name = "probe"
    topic = os.environ.get("PROBE_TOPIC", "probe-in")
    tables = (PROBE,)
    delivery_consumer = "search"

    def handle(self, event: Event) -> Iterable[Upsert]:
        return [Upsert("probe", {"id": event.event_id}, {"n": int(event.payload["n"])}, event.version)]


app = App("ledgered", agents=[ProbeAgent()], delivery=LEDGER)
