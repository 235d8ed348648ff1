"""An app whose lookup is fed by a topic no agent consumes (``App(lookup_topics=...)``).

- ``dir.owners`` (read only by the lookup ``owner``): ``owner.set`` events say which
  owner (with a ``label``) a conversation belongs to.
- ``dir.notes``: ``note.posted`` events name only their conversation; ``NoteAgent``
  writes one ``dir_note`` row per note under the conversation's owner, with its label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from framework import App, Column, Event, KeyedAgent, TableSchema, Upsert
from framework.state import Lookup, StateView

OWNERS_TOPIC = "dir.owners"
NOTE = TableSchema(
    name="dir_note",
    partition_key=(Column("owner", "text"),),
    clustering_key=(Column("note_id", "text"),),
    columns=(Column("body", "text"), Column("label", "text")),
)
OWNER = Lookup(
    "owner",
    OWNERS_TOPIC,
    key=lambda e: e.payload["conv"],
    value=lambda e: {"owner": e.payload["owner"], "label": e.payload["label"]},
)


class NoteAgent(KeyedAgent):
    name: ClassVar[str] = "notes"
    topic: ClassVar[str] = "dir.notes"
    event_types: ClassVar[tuple[str, ...]] = ("note.posted",)
    tables: ClassVar[tuple[TableSchema, ...]] = (NOTE,)
    lookups: ClassVar[tuple[Lookup, ...]] = (OWNER,)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        owner = state.value("owner", event.payload["conv"])
        key = {"owner": owner["owner"], "note_id": event.payload["note"]}
        return [
            Upsert(NOTE.name, key, {"body": event.payload["body"], "label": owner["label"]}, event.version)
        ]


app = App("directory", agents=[NoteAgent()], lookup_topics={OWNERS_TOPIC: ("owner.set",)})


def owner_set(conv: str, owner: str, label: str, version: int) -> Event:
    """The entry ``conv -> (owner, label)`` at ``version``."""
    return Event(f"o-{conv}-{version}", conv, version, version, "owner.set",
                 {"conv": conv, "owner": owner, "label": label})  # fmt: skip


def note(note_id: str, conv: str, body: str, version: int) -> Event:
    """A note naming only its conversation."""
    return Event(f"n-{note_id}", conv, version, version, "note.posted",
                 {"conv": conv, "note": note_id, "body": body})  # fmt: skip
