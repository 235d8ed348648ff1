"""Small apps for testing the kit: a convergent shop, and deliberately broken variants of it.

``shop`` declares one agent (items: upserts, row deletes, a state log, a
TTL cell) and one projection (``catalog``). The broken apps break the
convergence model on purpose: one stamps writes with the processing clock,
one counts deliveries, one projects a counter of its calls.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import (
    App,
    BadMessage,
    Column,
    Delete,
    Event,
    KeyedAgent,
    LogState,
    Projection,
    Row,
    TableSchema,
    Upsert,
    current_state,
    state_log_schema,
)
from framework.core.mutations import Mutation

ITEMS = TableSchema(
    "items",
    partition_key=(Column("item_id", "text"),),
    columns=(
        Column("name", "text"),
        Column("price", "bigint"),
        Column("flash", "text"),
        Column("n", "bigint"),
    ),
)
ITEM_STATUS = state_log_schema("item_status", (Column("item_id", "text"),), attrs=(Column("by", "text"),))
STATUS_PRECEDENCE = ("listed", "reserved", "sold")


class ItemsAgent(KeyedAgent):
    """``item.set`` upserts name/price, ``item.deleted`` deletes the row, ``item.status`` logs a
    state, ``item.flash`` writes a cell with a 60 s TTL, ``item.bogus`` writes an undeclared column."""

    name: ClassVar[str] = "items"
    topic: ClassVar[str] = "item-events"
    tables: ClassVar[tuple[TableSchema, ...]] = (ITEMS, ITEM_STATUS)
    event_types: ClassVar[tuple[str, ...]] = (
        "item.set",
        "item.deleted",
        "item.status",
        "item.flash",
        "item.bogus",
    )

    def handle(self, event: Event) -> Iterable[Mutation]:
        item = event.payload.get("item")
        if not isinstance(item, str) or not item:
            raise BadMessage("payload.item: missing or not a non-empty string")
        key = {"item_id": item}
        if event.type == "item.deleted":
            return [Delete(ITEMS.name, key, event.version)]
        if event.type == "item.status":
            attrs = {"by": event.payload.get("by")}
            return [LogState(ITEM_STATUS.name, key, event.payload["state"], event.occurred_at,
                             event.event_id, event.version, attrs)]  # fmt: skip
        if event.type == "item.flash":
            return [Upsert(ITEMS.name, key, {"flash": event.payload["text"]}, event.version, ttl=60)]
        if event.type == "item.bogus":
            return [Upsert(ITEMS.name, key, {"colour": "red"}, event.version)]
        cells = {name: event.payload[name] for name in ("name", "price") if name in event.payload}
        return [Upsert(ITEMS.name, key, cells, event.version)]


class CatalogProjection(Projection):
    """One document per item: its live cells and its current status."""

    name: ClassVar[str] = "catalog"
    alias: ClassVar[str] = "catalog"
    tables: ClassVar[tuple[TableSchema, ...]] = (ITEMS, ITEM_STATUS)
    mappings: ClassVar[Mapping[str, Any]] = {"properties": {"name": {"type": "keyword"}}}

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        item = [r for r in rows[ITEMS.name] if r.cells]
        if not item:
            return None
        doc: dict[str, Any] = {"item_id": key["item_id"], **item[0].values()}
        status = current_state(rows[ITEM_STATUS.name], STATUS_PRECEDENCE)
        if status is not None:
            doc["status"] = status.state
        return doc


def shop() -> App:
    """The convergent app."""
    return App("shop", agents=[ItemsAgent()], projections=[CatalogProjection()])


class ClockAgent(ItemsAgent):
    """Broken: writes at the processing clock instead of the event's version."""

    def handle(self, event: Event) -> Iterable[Mutation]:
        now = time.time_ns() // 1000
        out: list[Mutation] = []
        for m in super().handle(event):
            if isinstance(m, Upsert):
                out.append(Upsert(m.table, m.key, m.cells, now, m.ttl))
            else:
                out.append(m)
        return out


class CountingAgent(ItemsAgent):
    """Broken: writes how many deliveries of the item it has seen (state outside the store, one
    count per event loop, so each Driver starts from zero); duplicates and order change it."""

    _seen: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, int]]] = (
        weakref.WeakKeyDictionary()
    )

    def handle(self, event: Event) -> Iterable[Mutation]:
        out = list(super().handle(event))
        seen = self._seen.setdefault(asyncio.get_running_loop(), {})
        item = str(event.payload["item"])
        seen[item] = seen.get(item, 0) + 1
        return out + [Upsert(ITEMS.name, {"item_id": item}, {"n": seen[item]}, event.version)]


class CallCountingProjection(CatalogProjection):
    """Broken: puts a count of its own calls into every document."""

    calls: ClassVar[list[int]] = [0]

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        doc = super().build(key, rows)
        self.calls[0] += 1
        return None if doc is None else {**doc, "builds": self.calls[0]}


def clock_shop() -> App:
    return App("clock-shop", agents=[ClockAgent()], projections=[CatalogProjection()])


def counting_shop() -> App:
    return App("counting-shop", agents=[CountingAgent()], projections=[CatalogProjection()])


def call_counting_shop() -> App:
    return App("call-counting-shop", agents=[ItemsAgent()], projections=[CallCountingProjection()])
