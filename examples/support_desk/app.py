"""The support desk as one converge app: ``converge worker examples.support_desk.app:app``."""

from examples.support_desk.agents import support_agents
from examples.support_desk.projection import TicketProjection
from framework import App

app = App("support-desk", agents=support_agents(), projections=[TicketProjection()])
