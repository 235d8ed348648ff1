"""The support desk as one converge app: ``converge worker examples.support_desk.app:app``.

Retention policy: ``retention.py``; personal data: ``personal.py``; every micro-batch's
changes go to the notification table (``converge changes read --wide-store URL --consumer C``).
"""

from examples.support_desk.agents import support_agents
from examples.support_desk.personal import PERSONAL_DATA
from examples.support_desk.projection import TicketProjection
from examples.support_desk.retention import RETENTION
from framework import App

app = App(
    "support-desk",
    agents=support_agents(),
    projections=[TicketProjection()],
    retention=RETENTION,
    personal_data=PERSONAL_DATA,
    notifications=True,
)
