"""Retention: per-tenant, per-table days of data, deleted by a coordinated job that no replay undoes.

An app declares ``App(..., retention=RetentionPolicy(...))``; overrides per
tenant live in the store's ``converge_retention_policy`` table. The job
(``run_retention``, ``converge retention run``) writes, per partition, a
tombstone at the tenant's cutoff version minus one (``framework.retention.plan``),
re-projects the documents of what changed, and writes notifications. See
docs/how-to/retention.md.
"""

from framework.retention.job import (
    JOB,
    RetentionError,
    RetentionRun,
    domains,
    dry_run,
    ensure_tables,
    retained_tables,
    run_retention,
)
from framework.retention.plan import PartitionPlan, plan_partition
from framework.retention.policy import (
    ALL_TABLES,
    DAY_US,
    POLICY_TABLE,
    RetentionPolicy,
    overrides_from_rows,
    policy_row,
    tenant_of_row,
)
from framework.retention.scan import TableReport, retain_table

__all__ = [
    "ALL_TABLES",
    "DAY_US",
    "JOB",
    "POLICY_TABLE",
    "PartitionPlan",
    "RetentionError",
    "RetentionPolicy",
    "RetentionRun",
    "TableReport",
    "domains",
    "dry_run",
    "ensure_tables",
    "overrides_from_rows",
    "plan_partition",
    "policy_row",
    "retain_table",
    "retained_tables",
    "run_retention",
    "tenant_of_row",
]
