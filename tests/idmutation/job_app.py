"""A small app with owner tables for the ID mutation job's tests: activities and their state log,
partitioned by (tenant, owner), and one document per owner.

Events: ``activity.set`` (payload ``column``) writes ``{column: "<column>@<version>"}`` into
``activity`` row ``(tenant, owner, item)``; ``activity.log`` appends a state row. The ordering key
is ``tenant:owner:item``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from framework import App, Column, Event, KeyedAgent, LogState, Projection, Row, TableSchema, Upsert
from framework.core.schema import state_log_schema
from framework.idmutation import IdMutation, OwnerColumn
from framework.notifications import NotificationConfig

_PK = (Column("tenant", "text"), Column("owner", "text"))
ACTIVITY = TableSchema("activity", _PK, (Column("a", "text"), Column("b", "text")), (Column("item", "text"),))
ACTIVITY_LOG = state_log_schema("activity_log", _PK)
REQUESTS_TOPIC = "owner-id-requests"
ID_MUTATION = IdMutation(
    REQUESTS_TOPIC,
    columns=(OwnerColumn("activity", "owner", "tenant"), OwnerColumn("activity_log", "owner", "tenant")),
)


class ActivityAgent(KeyedAgent):
    name = "activities"
    topic = "owner-activities"
    tables = (ACTIVITY, ACTIVITY_LOG)
    event_types = ("activity.set", "activity.log")

    def handle(self, event: Event) -> Iterable[Upsert | LogState]:
        tenant, owner, item = event.ordering_key.split(":")
        if event.type == "activity.set":
            col = event.payload["column"]
            key = {"tenant": tenant, "owner": owner, "item": item}
            return [Upsert("activity", key, {col: f"{col}@{event.version}"}, event.version)]
        key = {"tenant": tenant, "owner": owner}
        return [LogState("activity_log", key, f"s-{item}", event.occurred_at, event.event_id, event.version)]


class OwnerProjection(Projection):
    name = "owners"
    alias = "idm-owners"
    tables = (ACTIVITY, ACTIVITY_LOG)
    mappings: ClassVar[Mapping[str, Any]] = {}

    def build(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> dict[str, Any] | None:
        items = {str(r.key["item"]): r.values() for r in rows["activity"]}
        states = sorted(str(r.values().get("state")) for r in rows["activity_log"])
        if not items and not states:
            return None
        return {"owner": key["owner"], "items": items, "states": states}


def owner_app(
    name: str = "owners",
    *,
    projections: bool = True,
    requests_topic: str = REQUESTS_TOPIC,
    notifications: NotificationConfig | bool = True,
) -> App:
    """The app; ``requests_topic`` apart per test on a shared broker."""
    return App(
        name,
        agents=[ActivityAgent()],
        projections=[OwnerProjection()] if projections else [],
        notifications=notifications,
        id_mutation=IdMutation(requests_topic, columns=ID_MUTATION.columns),
    )


def activity(kind: str, tenant: str, owner: str, item: str, version: int, column: str = "a") -> Event:
    """An event of ``kind`` (set, log) about ``tenant:owner:item`` at ``version``."""
    payload = {"column": column} if kind == "set" else {}
    event_id = f"{kind}-{tenant}-{owner}-{item}-{version}-{column}"
    return Event(event_id, f"{tenant}:{owner}:{item}", version, version, f"activity.{kind}", payload)


#: For ``converge idmap run --app tests.idmutation.job_app:app``.
app = owner_app()
#: The same without a projection (no index needed).
plain = owner_app("owners-plain", projections=False)
