"""An app whose reader agent joins two lookups, for the version-rule tests.

- ``t.owners``: ``owner.set`` events give an owner key (``owner``) a row
  (``row``), a ``label`` and a ``note``; the lookup ``owners`` keeps one entry per
  owner. ``OwnerAgent`` writes the owner's own row.
- ``t.tags``: ``tag.set`` events give a tag key (``tag_key``) a ``tag``; the
  lookup ``tags``. ``TagAgent`` writes the tag's own row.
- ``t.items``: ``item.posted`` events name an owner, a tag and a thread;
  ``ItemAgent`` reads both entries and writes the item's row under the owner's
  row (it moves when the owner's row changes) and the thread's row, which
  several items write (the cell rule merges them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.state import Lookup, StateView

OWNER = TableSchema("owner_row", partition_key=(Column("owner", "text"),), columns=(Column("label", "text"),))
TAG = TableSchema("tag_row", partition_key=(Column("tag_key", "text"),), columns=(Column("tag", "text"),))
ITEM = TableSchema(
    name="item",
    partition_key=(Column("row", "text"),),
    clustering_key=(Column("item", "text"),),
    columns=(Column("body", "text"), Column("label", "text"), Column("note", "text"), Column("tag", "text")),
)
THREAD = TableSchema(
    "thread",
    partition_key=(Column("thread", "text"),),
    columns=(Column("label", "text"), Column("tag", "text")),
)

OWNERS = Lookup(
    "owners", "t.owners", key=lambda e: e.payload["owner"],
    value=lambda e: {"row": e.payload["row"], "label": e.payload["label"], "note": e.payload["note"]},
)  # fmt: skip
TAGS = Lookup("tags", "t.tags", key=lambda e: e.payload["tag_key"], value=lambda e: {"tag": e.payload["tag"]})


class OwnerAgent(KeyedAgent):
    name: ClassVar[str] = "owners"
    topic: ClassVar[str] = "t.owners"
    event_types: ClassVar[tuple[str, ...]] = ("owner.set",)
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        return [Upsert(OWNER.name, {"owner": event.payload["owner"]}, {"label": event.payload["label"]},
                       event.version)]  # fmt: skip


class TagAgent(KeyedAgent):
    name: ClassVar[str] = "tags"
    topic: ClassVar[str] = "t.tags"
    event_types: ClassVar[tuple[str, ...]] = ("tag.set",)
    tables: ClassVar[tuple[TableSchema, ...]] = (TAG,)

    def handle(self, event: Event) -> Iterable[Upsert]:
        return [Upsert(TAG.name, {"tag_key": event.payload["tag_key"]}, {"tag": event.payload["tag"]},
                       event.version)]  # fmt: skip


class ItemAgent(KeyedAgent):
    name: ClassVar[str] = "items"
    topic: ClassVar[str] = "t.items"
    event_types: ClassVar[tuple[str, ...]] = ("item.posted",)
    tables: ClassVar[tuple[TableSchema, ...]] = (ITEM, THREAD)
    lookups: ClassVar[tuple[Lookup, ...]] = (OWNERS, TAGS)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        p = event.payload
        owner = state.value("owners", p["owner"])
        tag = state.value("tags", p["tag_key"])
        cells = {"body": p["body"], "label": owner["label"], "note": owner["note"], "tag": tag["tag"]}
        return [
            Upsert(ITEM.name, {"row": owner["row"], "item": p["item"]}, cells, event.version),
            Upsert(THREAD.name, {"thread": p["thread"]}, {"label": owner["label"], "tag": tag["tag"]},
                   event.version),
        ]  # fmt: skip


app = App("two-lookups", agents=[OwnerAgent(), TagAgent(), ItemAgent()])


def owner_set(owner: str, row: str, label: str, note: str, version: int) -> Event:
    return Event(f"o-{owner}-{version}-{label}-{note}-{row}", f"owner/{owner}", version, version, "owner.set",
                 {"owner": owner, "row": row, "label": label, "note": note})  # fmt: skip


def tag_set(tag_key: str, tag: str, version: int) -> Event:
    return Event(f"t-{tag_key}-{version}-{tag}", f"tag/{tag_key}", version, version, "tag.set",
                 {"tag_key": tag_key, "tag": tag})  # fmt: skip


def item(item_id: str, owner: str, tag_key: str, thread: str, body: str, version: int) -> Event:
    payload = {"item": item_id, "owner": owner, "tag_key": tag_key, "thread": thread, "body": body}
    return Event(f"i-{item_id}", f"item/{item_id}", version, version, "item.posted", payload)


#: The model's cells: ``{(table, key): {column: (value, write version)}}`` (``join_model.At`` in
#: the model's, so the write time may be the event's version plus the stream's re-mappings).
Cells = dict[tuple[str, tuple], dict[str, Any]]


def expected_cells(
    items: Iterable[Event], final_owner: Mapping[str, Any], final_tag: Mapping[str, Any], slack: int
) -> tuple[Cells, set[str]]:
    """The model: each item mapped once with the final entries (``(version, value)`` or None),
    written at its own version (plus at most ``slack`` re-mappings), the thread cells that several
    items write kept from the later item; and the ids of the items that wait for an entry."""
    from tests.state import join_model as model

    cells: Cells = {}
    waiting = set()
    for it in items:
        p = it.payload
        owner, tag = final_owner[p["owner"]], final_tag[p["tag_key"]]
        if owner is None or tag is None:
            waiting.add(it.event_id)
            continue
        o, t = owner[1], tag[1]

        def at(value: str, e: int = it.version) -> model.At:
            return model.At(value, e, slack)

        cells[("item", (o["row"], p["item"]))] = {
            "body": at(p["body"]), "label": at(o["label"]), "note": at(o["note"]), "tag": at(t["tag"]),
        }  # fmt: skip
        thread = cells.setdefault(("thread", (p["thread"],)), {})
        for column, value in (("label", o["label"]), ("tag", t["tag"])):
            thread[column] = model.joined_cell(thread[column], at(value)) if column in thread else at(value)
    return cells, waiting
