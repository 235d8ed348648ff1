"""The support desk with notifications on, for the live worker test:
``converge worker tests.notifications.notified_desk:app``."""

import copy

from examples.support_desk.app import app as desk
from framework.notifications import NotificationConfig

app = copy.copy(desk)  # every declaration of the example app, and notifications
app.notifications = NotificationConfig(count_inserts=True)
