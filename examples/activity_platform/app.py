"""The reference activity platform as one converge app: three agents and one projection.

``converge worker examples.activity_platform.app:app`` runs it (settings from
the environment, see ``framework.Settings``).
"""

from agents import ActivityProjection, reference_agents
from framework import App

app = App("activity-platform", agents=reference_agents(), projections=[ActivityProjection()])
