"""A toy app for the framework's own tests: notes with a state log and a projection."""

from __future__ import annotations

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

NOTE = TableSchema("note", (Column("note_id", "text"),), (Column("title", "text"), Column("score", "double")))
NOTE_LOG = state_log_schema("note_log", (Column("note_id", "text"),))
AUDIT = TableSchema("audit", (Column("id", "text"),), (Column("n", "bigint"),))


class NoteAgent(KeyedAgent):
    name = "notes"
    topic = "notes-in"
    tables = (NOTE, NOTE_LOG, AUDIT)
    event_types = ("note.set", "note.clear", "note.state", "note.audit")

    def handle(self, event: Event) -> Iterable[Upsert | Delete | LogState]:
        p = event.payload
        key = {"note_id": event.ordering_key}
        if event.type == "note.set":
            return [Upsert("note", key, dict(p), event.version)]
        if event.type == "note.clear":
            return [Delete("note", key, event.version, columns=tuple(p["columns"]))]
        if event.type == "note.state":
            return [LogState("note_log", key, p["state"], event.occurred_at, event.event_id, event.version)]
        if event.type == "note.audit":
            return [Upsert("audit", {"id": event.event_id}, {"n": 1}, event.version)]
        raise BadMessage(f"unknown type {event.type}")


class NoteProjection(Projection):
    name = "notes"
    alias = "notes"
    tables = (NOTE, NOTE_LOG)
    mappings: ClassVar[Mapping[str, Any]] = {"properties": {"title": {"type": "text"}}}

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        notes = [r for r in rows["note"] if r.cells]
        if not notes:
            return None
        doc: dict[str, Any] = dict(notes[0].values())
        state = current_state(rows["note_log"], ("open", "done"))
        if state is not None:
            doc["state"] = state.state
        return doc


def toy_app() -> App:
    return App("toy", agents=[NoteAgent()], projections=[NoteProjection()])


def ev(type_: str, key: str, version: int, **payload: Any) -> Event:
    return Event(f"{type_}-{key}-{version}", key, version, version, type_, payload)
