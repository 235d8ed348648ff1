"""The support desk with notifications on, for the live worker test:
``converge worker tests.notifications.notified_desk:app``."""

from examples.support_desk.app import app as desk
from framework import App

app = App(
    desk.name, agents=desk.agents, projections=desk.projections, runtime=desk.runtime, notifications=True
)
