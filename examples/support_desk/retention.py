"""How long the support desk keeps its data (``converge retention run --app examples.support_desk.app:app``).

A ticket, its status log and its comments are kept a year; the tenant ``globex``
keeps its comments 90 days. The log and the comments are of their ticket's tenant.
"""

from framework.retention import RetentionPolicy

RETENTION = RetentionPolicy(
    default_days=365,
    per_tenant={"globex": {"ticket_comment": 90}},
    tenant_from={"ticket_status_log": "ticket", "ticket_comment": "ticket"},
)
