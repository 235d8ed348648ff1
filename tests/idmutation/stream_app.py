"""A small app for the stream side of ID mutation: activities of an owner (a lead or contact id).

``owner_activity`` (partition ``(tenant, owner_id)``, clustering ``activity_id``) gets one row per
activity event; ``owner_log`` (the same partition, a state log) one entry per status event; a
``activity.removed`` event deletes its row. The owner id is whatever the event carries: the
runtime resolves it through the ID map.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from framework import App, Column, Delete, Event, KeyedAgent, LogState, TableSchema, Upsert, state_log_schema
from framework.idmutation import IdMutation, OwnerColumn

__all__ = ["app", "OWNER_ACTIVITY", "OWNER_LOG", "activity", "removed", "status", "TOPIC", "REQUESTS"]

TOPIC = "t.owner-activity"
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
    event_types: ClassVar[tuple[str, ...]] = ("activity.logged", "activity.removed", "owner.status")
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER_ACTIVITY, OWNER_LOG)

    def handle(self, event: Event) -> Iterable[Upsert | Delete | LogState]:
        p = event.payload
        owner = {"tenant": p["tenant"], "owner_id": p["owner"]}
        if event.type == "owner.status":
            return [LogState(OWNER_LOG.name, owner, p["status"], event.occurred_at, event.event_id,
                             event.version, {"by": p["by"]})]  # fmt: skip
        key = {**owner, "activity_id": p["activity"]}
        if event.type == "activity.removed":
            return [Delete(OWNER_ACTIVITY.name, key, event.version)]
        cells = {k: p[k] for k in ("body", "kind") if k in p}
        return [Upsert(OWNER_ACTIVITY.name, key, cells, event.version)]


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


app = App(
    "owner-stream",
    agents=[OwnerAgent()],
    id_mutation=IdMutation(REQUESTS, columns=(OwnerColumn("owner_activity", "owner_id", "tenant"),
                                              OwnerColumn("owner_log", "owner_id", "tenant"))),
)  # fmt: skip
