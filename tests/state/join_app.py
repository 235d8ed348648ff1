"""A small app with a lookup join, for the join tests.

- ``t.parents``: ``parent.set`` events move a conversation (``conv``) to a
  parent (``parent``, with a ``label``); the lookup ``parent`` keeps the
  latest one per conversation. ``ParentAgent`` writes the parent's row.
- ``t.children``: ``child.posted`` events carry only their conversation;
  ``ChildAgent`` writes one ``msg`` row per message under the parent the
  conversation belongs to, with the parent's label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.state import JoinConfig, Lookup, StateView

PARENT = TableSchema(
    name="parent_row",
    partition_key=(Column("parent", "text"),),
    columns=(Column("label", "text"),),
)
MSG = TableSchema(
    name="msg",
    partition_key=(Column("parent", "text"),),
    clustering_key=(Column("msg_id", "text"),),
    columns=(Column("body", "text"), Column("conv", "text"), Column("label", "text")),
)

CONV = Lookup(
    "parent",
    "t.parents",
    key=lambda e: e.payload["conv"],
    value=lambda e: {"parent": e.payload["parent"], "label": e.payload["label"]},
)


class ParentAgent(KeyedAgent):
    name: ClassVar[str] = "parents"
    topic: ClassVar[str] = "t.parents"
    event_types: ClassVar[tuple[str, ...]] = ("parent.set",)
    tables: ClassVar[tuple[TableSchema, ...]] = (PARENT,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        p = event.payload
        return [Upsert(PARENT.name, {"parent": p["parent"]}, {"label": p["label"]}, event.version)]


class ChildAgent(KeyedAgent):
    name: ClassVar[str] = "children"
    topic: ClassVar[str] = "t.children"
    event_types: ClassVar[tuple[str, ...]] = ("child.posted",)
    tables: ClassVar[tuple[TableSchema, ...]] = (MSG,)
    lookups: ClassVar[tuple[Lookup, ...]] = (CONV,)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        p = event.payload
        if p.get("bad"):
            raise ValueError("a bad child")
        parent = state.get("parent", p["conv"]).value
        key = {"parent": parent["parent"], "msg_id": p["msg_id"]}
        cells = {"body": p["body"], "conv": p["conv"], "label": parent["label"]}
        return [Upsert(MSG.name, key, cells, event.version)]


def join_app(joins: JoinConfig | None = None) -> App:
    return App("join-test", agents=[ParentAgent(), ChildAgent()], joins=joins)


app = join_app()


def parent_set(conv: str, parent: str, label: str, version: int) -> Event:
    return Event(f"p-{conv}-{version}", f"conv/{conv}", version, version, "parent.set",
                 {"conv": conv, "parent": parent, "label": label})  # fmt: skip


def child(msg_id: str, conv: str, body: str, version: int) -> Event:
    return Event(f"c-{msg_id}", f"conv/{conv}", version, version, "child.posted",
                 {"conv": conv, "msg_id": msg_id, "body": body})  # fmt: skip
