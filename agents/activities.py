"""The activities agent: emails and meetings into their hub rows.

Created, updated and rescheduled events upsert the main record's cells (and
the identity cells) at the event's version; updates carry only the changed
fields, so per-cell last-write-wins keeps the newest value of each field
whatever the arrival order.

A cancelled meeting is a row ``Delete`` at the cancellation's version. Like a
Cassandra row tombstone it shadows *every* cell of the row written with an
equal or lower version, augmented cells included: insights and sharing
computed before the cancellation go with the meeting. Cells written later
(an insight computed after the cancellation, a re-creation of the meeting
with a higher version) are live again; a re-created meeting writes its whole
record, so it comes back complete, with only the augmented cells newer than
the cancellation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from agents.event_types import TOPIC_ACTIVITIES, types_of, validate
from agents.schemas import ACTIVITY_HUB, OWNER_ACTIVITY, join_addresses
from framework import KeyedAgent
from framework.core.events import Event
from framework.core.mutations import CellValue, Delete, Mutation, Upsert
from framework.core.schema import TableSchema

__all__ = ["ActivitiesAgent"]

_STATUS = {"email.created": "sent", "meeting.created": "scheduled", "meeting.rescheduled": "rescheduled"}


class ActivitiesAgent(KeyedAgent):
    """Maps email and meeting events to upserts and deletes of ``activity_hub`` rows."""

    name: ClassVar[str] = "activities"
    topic: ClassVar[str] = TOPIC_ACTIVITIES
    event_types: ClassVar[tuple[str, ...]] = types_of(TOPIC_ACTIVITIES)
    tables: ClassVar[tuple[TableSchema, ...]] = (ACTIVITY_HUB, OWNER_ACTIVITY)

    def handle(self, event: Event) -> Iterable[Mutation]:
        valid = validate(event, self.topic)
        key = {"hub_id": valid.ref.hub_id}
        if event.type == "meeting.cancelled":
            return [Delete(ACTIVITY_HUB.name, key, event.version)]
        f = valid.fields
        cells: dict[str, CellValue] = {
            "org_id": valid.ref.org_id,
            "source": valid.ref.source,
            "external_id": valid.ref.external_id,
            "kind": event.type.partition(".")[0],
        }
        for name in ("subject", "body_preview", "starts_at", "ends_at"):
            if name in f:
                cells[name] = f[name]
        if "participants" in f:
            cells["participants"] = join_addresses(f["participants"])
        if "sent_at" in f:
            cells["starts_at"] = f["sent_at"]
        if event.type in _STATUS:
            cells["status"] = _STATUS[event.type]
        out: list[Mutation] = [Upsert(ACTIVITY_HUB.name, key, cells, event.version)]
        if "owner_id" in f:
            owned = {"org_id": valid.ref.org_id, "owner_id": f["owner_id"], "hub_id": valid.ref.hub_id}
            row = {"kind": cells["kind"], "created_at": event.occurred_at}
            out.append(Upsert(OWNER_ACTIVITY.name, owned, row, event.version))
        return out
