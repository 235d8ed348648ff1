"""The framework's own tables: the one list of every table converge writes beside an app's data.

``bookkeeping_tables(app)`` names them: the erasure deny-list, its record marker and audit, the
notification tables, the retention policy, pending re-projections and tenant
records, the ID-mutation requests, map and batches, the projections' and
aggregates' version marks, the aggregates' contributions and totals (derived from the
data: retention of the data reaches them through re-projection) and the delivery ledger.
They are the framework's records, not data: retention never expires them (a deny-list entry lasts as long as
the store), whatever the policy says about ``*`` or ``default_days``.
"""

from __future__ import annotations

from framework.aggregates.tables import tables_of
from framework.core.app_model import AppModel
from framework.erasure.tables import ERASURE_TABLES, RECORD_TABLE
from framework.idmutation.tables import ID_TABLES
from framework.jobs.reprojection import PENDING_TABLE
from framework.notifications.schema import NOTIFICATION_TABLES
from framework.retention.policy import POLICY_TABLE
from framework.retention.tenants import TENANT_TABLE

__all__ = ["bookkeeping_tables"]


def bookkeeping_tables(app: AppModel) -> frozenset[str]:
    """Names of every framework table ``app`` may have in its store (see the module docstring)."""
    names = {t.name for t in (*ERASURE_TABLES, *ID_TABLES, *NOTIFICATION_TABLES)}
    names |= {POLICY_TABLE.name, PENDING_TABLE.name, TENANT_TABLE.name, RECORD_TABLE.name}
    names |= {p.version_table.name for p in app.views}
    names |= {t.name for a in getattr(app, "aggregates", ()) for t in tables_of(a).all}
    delivery = getattr(app, "delivery", None)
    if delivery is not None:
        names |= {delivery.table, delivery.index_table}
    return frozenset(names)
