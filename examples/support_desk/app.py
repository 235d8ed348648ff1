"""The support desk as one converge app: ``converge worker examples.support_desk.app:app``.

Retention: a ticket, its status log and its comments are kept a year; the
tenant ``globex`` keeps its comments 90 days. The log and the comments are of
their ticket's tenant. ``converge retention run --app examples.support_desk.app:app``.
"""

from examples.support_desk.agents import support_agents
from examples.support_desk.personal import PERSONAL_DATA
from examples.support_desk.projection import TicketProjection
from framework import App
from framework.retention import RetentionPolicy

RETENTION = RetentionPolicy(
    default_days=365,
    per_tenant={"globex": {"ticket_comment": 90}},
    tenant_from={"ticket_status_log": "ticket", "ticket_comment": "ticket"},
)

app = App(
    "support-desk",
    agents=support_agents(),
    projections=[TicketProjection()],
    retention=RETENTION,
    personal_data=PERSONAL_DATA,
)
