"""Reference agents of the activity platform (emails, meetings, engagement, insights)."""

from __future__ import annotations

from agents.activities import ActivitiesAgent
from agents.engagement import EngagementAgent, current_engagement
from agents.event_types import TOPIC_ACTIVITIES, TOPIC_ENGAGEMENT, TOPIC_INSIGHTS
from agents.insights import InsightsAgent
from agents.projection import INDEX_ALIAS, INDEX_MAPPINGS, ActivityProjection
from agents.schemas import TABLES
from framework import KeyedAgent

__all__ = [
    "ActivitiesAgent",
    "EngagementAgent",
    "InsightsAgent",
    "REFERENCE_AGENTS",
    "reference_agents",
    "TABLES",
    "TOPIC_ACTIVITIES",
    "TOPIC_ENGAGEMENT",
    "TOPIC_INSIGHTS",
    "INDEX_ALIAS",
    "INDEX_MAPPINGS",
    "ActivityProjection",
    "current_engagement",
]

#: The reference agent classes, one per topic.
REFERENCE_AGENTS: tuple[type[KeyedAgent], ...] = (ActivitiesAgent, EngagementAgent, InsightsAgent)


def reference_agents() -> list[KeyedAgent]:
    """One instance of each reference agent."""
    return [cls() for cls in REFERENCE_AGENTS]
