"""A small app for the CLI tests: people keyed by address (a ``key_column`` declaration) and notes that
mention them in a list cell (a scanned one). No projection, so no index is needed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from framework import App, Column, Event, KeyedAgent, PersonalData, TableSchema, Upsert

PERSON = TableSchema(
    "person",
    partition_key=(Column("email", "text"),),
    columns=(Column("name", "text"), Column("plan", "text")),
)
NOTE = TableSchema(
    "note", partition_key=(Column("note_id", "text"),), columns=(Column("body", "text"), Column("cc", "text"))
)


class NotesAgent(KeyedAgent):
    """``person.set`` -> a person row keyed by address; ``note.set`` -> a note with a cc list."""

    name: ClassVar[str] = "notes"
    topic: ClassVar[str] = "notes"
    event_types: ClassVar[tuple[str, ...]] = ("person.set", "note.set")
    tables: ClassVar[tuple[TableSchema, ...]] = (PERSON, NOTE)

    def handle(self, event: Event) -> Iterable[Upsert]:
        p = event.payload
        if event.type == "person.set":
            return [
                Upsert("person", {"email": p["email"]}, {"name": p["name"], "plan": p["plan"]}, event.version)
            ]
        return [Upsert("note", {"note_id": p["note_id"]}, {"body": p["body"], "cc": p["cc"]}, event.version)]


app = App(
    "notes",
    agents=[NotesAgent()],
    personal_data=[
        PersonalData("email", "person", key_column="email", normalize=str.lower),
        PersonalData(
            "email", "note", columns=("cc",), separator=";", erase=("cc", "body"), normalize=str.lower
        ),
    ],
)
