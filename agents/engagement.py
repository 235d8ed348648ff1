"""The engagement agent: recipient engagement as a state log per hub row.

Each sent / opened / clicked / replied event appends one ``engagement_log``
row with clustering key ``(occurred_at, event_id)``, so a replay rewrites the
same row and arrival order does not matter. No transition is stored: the
current state is derived from the whole log by ``current_engagement``
(latest ``at``, then precedence sent < opened < clicked < replied, then
``event_id``). The log is never deleted with the hub row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, NamedTuple

from agents.event_types import ENGAGEMENT_STATES, TOPIC_ENGAGEMENT, types_of, validate
from agents.schemas import ENGAGEMENT_LOG
from framework import KeyedAgent
from framework.core.events import Event
from framework.core.mutations import LogState, Mutation
from framework.core.rows import Row
from framework.core.schema import TableSchema
from framework.core.state_log import current_state

__all__ = ["EngagementAgent", "Engagement", "ENGAGEMENT_PRECEDENCE", "current_engagement"]

#: Precedence of the states on an ``at`` tie: a later one wins.
ENGAGEMENT_PRECEDENCE: tuple[str, ...] = ENGAGEMENT_STATES


class EngagementAgent(KeyedAgent):
    """Maps engagement events to ``LogState`` appends keyed by the hub row."""

    name: ClassVar[str] = "engagement"
    topic: ClassVar[str] = TOPIC_ENGAGEMENT
    event_types: ClassVar[tuple[str, ...]] = types_of(TOPIC_ENGAGEMENT)
    tables: ClassVar[tuple[TableSchema, ...]] = (ENGAGEMENT_LOG,)

    def handle(self, event: Event) -> Iterable[Mutation]:
        valid = validate(event, self.topic)
        return [
            LogState(
                ENGAGEMENT_LOG.name,
                {"hub_id": valid.ref.hub_id},
                state=event.type.partition(".")[2],
                at=event.occurred_at,
                event_id=event.event_id,
                version=event.version,
                attrs={"actor": valid.fields["actor"]},
            )
        ]


class Engagement(NamedTuple):
    """The current engagement state of a hub row and the log's version (max write time)."""

    state: str
    version: int


def current_engagement(log: Iterable[Row]) -> Engagement | None:
    """The current state of one hub row's engagement log rows; None for an empty log.

    The state is ``framework.core.state_log.current_state`` under the engagement
    precedence; the version is the highest write time of any live log row.
    """
    rows = list(log)
    entry = current_state(rows, ENGAGEMENT_PRECEDENCE)
    if entry is None:
        return None
    return Engagement(entry.state, max(r.version for r in rows if r.cells))
