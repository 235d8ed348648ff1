"""The support desk as one converge app: ``converge worker examples.support_desk.app:app``.
Aggregates: ``aggregates.py``; retention: ``retention.py``; personal data: ``personal.py``; ID
mutation of requester ids: ``id_mutation.py``; every micro-batch's changes go to the notification table."""

from examples.support_desk.agents import support_agents
from examples.support_desk.aggregates import AGGREGATES
from examples.support_desk.id_mutation import ID_MUTATION
from examples.support_desk.personal import PERSONAL_DATA
from examples.support_desk.projection import TicketProjection
from examples.support_desk.retention import RETENTION
from framework import App

app = App(
    "support-desk",
    agents=support_agents(),
    projections=[TicketProjection()],
    aggregates=AGGREGATES,
    retention=RETENTION,
    personal_data=PERSONAL_DATA,
    notifications=True,
    id_mutation=ID_MUTATION,
)
