"""The reference activity platform as one converge app: three agents, one projection and the
engagement metrics as aggregates (``aggregates.py``).

``converge worker examples.activity_platform.app:app`` runs it (settings from
the environment, see ``framework.Settings``). Retention (seed 001: activity data
lives six months to two years): two years by default, the engagement log one
year, and the tenant ``org-0001`` keeps everything six months; a log row is of
its hub row's organisation. ``converge retention run --app examples.activity_platform.app:app``.
Every micro-batch's changes are recorded in the notification table
(``converge changes read --wide-store URL --consumer NAME``). ID mutation of the CRM owner
ids activities are logged against: ``id_mutation.py``.
"""

from agents import ActivityProjection, reference_agents
from examples.activity_platform.aggregates import AGGREGATES
from examples.activity_platform.id_mutation import ID_MUTATION
from examples.activity_platform.personal import PERSONAL_DATA
from framework import App
from framework.retention import RetentionPolicy

RETENTION = RetentionPolicy(
    default_days=730,
    per_table={"engagement_log": 365},
    per_tenant={"org-0001": {"*": 182}},
    tenant_from={"engagement_log": "activity_hub"},
)

app = App(
    "activity-platform",
    agents=reference_agents(),
    projections=[ActivityProjection()],
    aggregates=AGGREGATES,
    retention=RETENTION,
    personal_data=PERSONAL_DATA,
    notifications=True,
    id_mutation=ID_MUTATION,
)
