"""A small app for the stream side of ID mutation: activities of an owner (a lead or contact id).

``owner_activity`` (partition ``(tenant, owner_id)``, clustering ``activity_id``) gets one row per
activity event; ``owner_log`` (the same partition, a state log) one entry per status event; a
``activity.removed`` event deletes its row. ``thread.linked`` events (on the same topic) feed the
lookup ``threads`` (thread -> tenant and owner); ``NoteAgent`` joins ``thread.note`` events to it
and writes an ``owner_activity`` row of the thread's owner. The owner id is whatever the event
or the entry carries: the runtime resolves it through the ID map.
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
from framework.idmutation import IdMutation, OwnerColumn
from framework.state import Lookup, StateView

__all__ = ["app", "OWNER_ACTIVITY", "OWNER_LOG", "activity", "removed", "status", "linked", "note", "TOPIC",
           "NOTES", "REQUESTS"]  # fmt: skip

TOPIC = "t.owner-activity"
NOTES = "t.owner-notes"
REQUESTS = "t.owner-id-requests"
_OWNER = (Column("tenant", "text"), Column("owner_id", "text"))

OWNER_ACTIVITY = TableSchema(
    name="owner_activity",
    partition_key=_OWNER,
    clustering_key=(Column("activity_id", "text"),),
    columns=(Column("body", "text"), Column("kind", "text")),
)
OWNER_LOG = state_log_schema("owner_log", partition_key=_OWNER, attrs=(Column("by", "text"),))


class OwnerAgent(KeyedAgent):
    """Activity events of an owner into its partitions."""

    name: ClassVar[str] = "owner_activity"
    topic: ClassVar[str] = TOPIC
    event_types: ClassVar[tuple[str, ...]] = (
        "activity.logged",
        "activity.removed",
        "owner.status",
        "thread.linked",
    )
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER_ACTIVITY, OWNER_LOG)

    def handle(self, event: Event) -> Iterable[Upsert | Delete | LogState]:
        p = event.payload
        if event.type == "thread.linked":
            return []
        owner = {"tenant": p["tenant"], "owner_id": p["owner"]}
        if event.type == "owner.status":
            return [LogState(OWNER_LOG.name, owner, p["status"], event.occurred_at, event.event_id,
                             event.version, {"by": p["by"]})]  # fmt: skip
        key = {**owner, "activity_id": p["activity"]}
        if event.type == "activity.removed":
            return [Delete(OWNER_ACTIVITY.name, key, event.version)]
        cells = {k: p[k] for k in ("body", "kind") if k in p}
        return [Upsert(OWNER_ACTIVITY.name, key, cells, event.version)]


THREADS = Lookup(
    "threads",
    TOPIC,
    key=lambda e: e.payload["thread"] if e.type == "thread.linked" else None,
    value=lambda e: {"tenant": e.payload["tenant"], "owner": e.payload["owner"]},
)


class NoteAgent(KeyedAgent):
    """Notes that name only their thread: a row of the thread's owner (a lookup join)."""

    name: ClassVar[str] = "notes"
    topic: ClassVar[str] = NOTES
    event_types: ClassVar[tuple[str, ...]] = ("thread.note",)
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER_ACTIVITY,)
    lookups: ClassVar[tuple[Lookup, ...]] = (THREADS,)

    def handle(self, event: Event, state: StateView) -> Iterable[Upsert]:  # type: ignore[override]
        entry = state.value("threads", event.payload["thread"])
        key = {"tenant": entry["tenant"], "owner_id": entry["owner"], "activity_id": event.payload["note"]}
        return [Upsert(OWNER_ACTIVITY.name, key, {"body": event.payload["body"]}, event.version)]


def linked(eid: str, tenant: str, owner: str, thread: str, version: int) -> Event:
    """A ``thread.linked`` event: the lookup entry thread -> (tenant, owner)."""
    payload = {"tenant": tenant, "owner": owner, "thread": thread}
    return Event(eid, f"{tenant}/{owner}", version, version, "thread.linked", payload)


def note(eid: str, thread: str, note_id: str, body: str, version: int) -> Event:
    """A ``thread.note`` event naming only its thread."""
    return Event(
        eid, thread, version, version, "thread.note", {"thread": thread, "note": note_id, "body": body}
    )


def activity(eid: str, tenant: str, owner: str, act: str, version: int, **cells: str) -> Event:
    """An ``activity.logged`` event writing ``cells`` of ``act`` under ``owner``."""
    payload = {"tenant": tenant, "owner": owner, "activity": act, **cells}
    return Event(eid, f"{tenant}/{owner}", version, version, "activity.logged", payload)


def removed(eid: str, tenant: str, owner: str, act: str, version: int) -> Event:
    """An ``activity.removed`` event deleting the row of ``act`` under ``owner``."""
    payload = {"tenant": tenant, "owner": owner, "activity": act}
    return Event(eid, f"{tenant}/{owner}", version, version, "activity.removed", payload)


def status(eid: str, tenant: str, owner: str, state: str, version: int, by: str = "sys") -> Event:
    """An ``owner.status`` event: one ``owner_log`` entry."""
    payload = {"tenant": tenant, "owner": owner, "status": state, "by": by}
    return Event(eid, f"{tenant}/{owner}", version, version, "owner.status", payload)


class OwnerDocs(Projection):
    """One document per owner: its activities' cells and its states (``tenant/owner``)."""

    name: ClassVar[str] = "owner_docs"
    alias: ClassVar[str] = "owner-docs"
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER_ACTIVITY, OWNER_LOG)

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        acts = {str(r.key["activity_id"]): r.values() for r in rows["owner_activity"]}
        states = sorted(f"{r.values().get('state')!s}@{r.key['at']!s}" for r in rows["owner_log"])
        if not acts and not states:
            return None
        return {"tenant": key["tenant"], "owner": key["owner_id"], "activities": acts, "states": states}


def owner_doc(tenant: str, owner: str, acts: Mapping[str, Mapping[str, Any]], states: Sequence[str]) -> dict:
    """What ``OwnerDocs`` builds for these rows (for oracles)."""
    return {"tenant": tenant, "owner": owner, "activities": {k: dict(v) for k, v in acts.items()},
            "states": sorted(states)}  # fmt: skip


app = App(
    "owner-stream",
    agents=[OwnerAgent(), NoteAgent()],
    id_mutation=IdMutation(REQUESTS, columns=(OwnerColumn("owner_activity", "owner_id", "tenant"),
                                              OwnerColumn("owner_log", "owner_id", "tenant"))),
)  # fmt: skip

#: The same app with a projection of the owner tables (documents moved with their rows).
projected = App(
    "owner-stream-docs",
    agents=[OwnerAgent(), NoteAgent()],
    projections=[OwnerDocs()],
    id_mutation=app.id_mutation,
)
