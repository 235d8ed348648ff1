"""Apps of the lookup-join benchmark: one child agent with a lookup, one without.

``join_app``: ``bench.children`` events carry a conversation; the lookup
``conv`` (fed by ``bench.parents``) gives the parent the row is keyed by.
``plain_app``: the same events, the parent taken from the payload (no lookup).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.state import Lookup, StateView

MSG = TableSchema(
    name="bench_msg",
    partition_key=(Column("parent", "text"),),
    clustering_key=(Column("msg_id", "text"),),
    columns=(Column("body", "text"), Column("label", "text")),
)
CONV = Lookup(
    "conv",
    "bench.parents",
    key=lambda e: e.payload["conv"],
    value=lambda e: {"parent": e.payload["parent"], "label": e.payload["label"]},
)


class JoinChild(KeyedAgent):
    name: ClassVar[str] = "children"
    topic: ClassVar[str] = "bench.children"
    tables: ClassVar[tuple[TableSchema, ...]] = (MSG,)
    lookups: ClassVar[tuple[Lookup, ...]] = (CONV,)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        parent = state.value("conv", event.payload["conv"])
        key = {"parent": parent["parent"], "msg_id": event.payload["msg_id"]}
        cells = {"body": event.payload["body"], "label": parent["label"]}
        return [Upsert(MSG.name, key, cells, event.version)]


class PlainChild(KeyedAgent):
    name: ClassVar[str] = "children"
    topic: ClassVar[str] = "bench.children"
    tables: ClassVar[tuple[TableSchema, ...]] = (MSG,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        key = {"parent": "P-" + event.payload["conv"], "msg_id": event.payload["msg_id"]}
        return [Upsert(MSG.name, key, {"body": event.payload["body"], "label": "x"}, event.version)]


join_app = App("bench-join", agents=[JoinChild()], lookup_topics={"bench.parents": ("parent.set",)})
plain_app = App("bench-plain", agents=[PlainChild()])
