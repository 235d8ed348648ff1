"""A small app for retention properties: items and their state log, keyed by tenant (``org_id``).

Times are in steps of six hours (``STEP``) from 0; a cell's value names its
column and version, so two writes of one version are equal (no tie to break).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import (
    App,
    Column,
    Delete,
    Event,
    KeyedAgent,
    LogState,
    Projection,
    Row,
    TableSchema,
    Upsert,
    state_log_schema,
)
from framework.retention import DAY_US, RetentionPolicy

STEP = DAY_US // 4
_PK = (Column("org_id", "text"), Column("item_id", "text"))
ITEM = TableSchema("item", _PK, (Column("a", "text"), Column("b", "text")))
ITEM_LOG = state_log_schema("item_log", _PK)

#: now = step 40 (10 days); o1: 5 days (cutoff step 20); o2: forever; o3: items 5 days, log 3 days.
NOW_US = 40 * STEP
POLICY = RetentionPolicy(default_days=5, per_tenant={"o2": {"*": None}, "o3": {"item_log": 3}})


class ItemAgent(KeyedAgent):
    name = "items"
    topic = "items-in"
    tables = (ITEM, ITEM_LOG)
    event_types = ("item.set", "item.delete", "item.log")

    def handle(self, event: Event) -> Iterable[Upsert | Delete | LogState]:
        org, item = event.ordering_key.split(":")
        key = {"org_id": org, "item_id": item}
        if event.type == "item.set":
            col = event.payload["column"]
            return [Upsert("item", key, {col: f"{col}{event.version}"}, event.version)]
        if event.type == "item.delete":
            return [Delete("item", key, event.version)]
        return [
            LogState(
                "item_log", key, f"s{event.version % 3}", event.occurred_at, event.event_id, event.version
            )
        ]


class ItemProjection(Projection):
    name = "items"
    alias = "retained-items"
    tables = (ITEM, ITEM_LOG)
    mappings: ClassVar[Mapping[str, Any]] = {}

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        doc: dict[str, Any] = {}
        for r in rows["item"]:
            doc.update(r.values())
        states = [str(r.values().get("state")) for r in rows["item_log"]]
        if states:
            doc["states"] = states
        return doc or None


def toy_app(policy: RetentionPolicy = POLICY) -> App:
    return App("retained", agents=[ItemAgent()], projections=[ItemProjection()], retention=policy)


def item_event(kind: str, org: str, item: str, step: int, column: str = "a", nudge: int = 0) -> Event:
    """An event of ``kind`` (set, delete, log) about ``org:item`` at version ``step * STEP + nudge``."""
    version = step * STEP + nudge
    payload = {"column": column} if kind == "set" else {}
    event_id = f"{kind}-{org}-{item}-{version}-{column}"
    return Event(event_id, f"{org}:{item}", version, version, f"item.{kind}", payload)


#: For ``converge retention run --app tests.retention.toy:plain``: the same tables, no projection.
plain = App("retained-plain", agents=[ItemAgent()], retention=POLICY)

#: The toy app as jobs load it (``tests.retention.toy:app``).
app = toy_app()
