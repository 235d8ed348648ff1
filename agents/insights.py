"""The insights agent: augmented cells (model insights, sharing) of the hub row.

Insights are upserted by natural key into the activity's hub row at the
insight's version, also before the main record exists; the row then holds
only identity and augmented cells until the record arrives. A ``None`` field
clears its cell (a cell tombstone at that version); an empty ``shared_with``
clears the sharing cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from agents.event_types import TOPIC_INSIGHTS, types_of, validate
from agents.schemas import ACTIVITY_HUB, join_addresses
from framework import KeyedAgent
from framework.core.events import Event
from framework.core.mutations import CellValue, Mutation, Upsert
from framework.core.schema import TableSchema

__all__ = ["InsightsAgent"]


class InsightsAgent(KeyedAgent):
    """Maps insight and sharing events to upserts of augmented ``activity_hub`` cells."""

    name: ClassVar[str] = "insights"
    topic: ClassVar[str] = TOPIC_INSIGHTS
    event_types: ClassVar[tuple[str, ...]] = types_of(TOPIC_INSIGHTS)
    tables: ClassVar[tuple[TableSchema, ...]] = (ACTIVITY_HUB,)

    def handle(self, event: Event) -> Iterable[Mutation]:
        valid = validate(event, self.topic)
        cells: dict[str, CellValue] = {
            "org_id": valid.ref.org_id,
            "source": valid.ref.source,
            "external_id": valid.ref.external_id,
        }
        for name, value in valid.fields.items():
            cells[name] = join_addresses(value) if name == "shared_with" else value
        return [Upsert(ACTIVITY_HUB.name, {"hub_id": valid.ref.hub_id}, cells, event.version)]
