"""Notifications: what every writer changed, per tenant and ingestion bucket, and incremental reads.

Writers (the stream runtime once per micro-batch, the Spark backfill, batch
jobs) add ``notification_mutations`` of each batch to the
``converge_notifications`` table; consumers read the entries since their own
checkpoint with ``NotificationReader`` and commit. See
docs/how-to/notifications.md.
"""

from framework.notifications.config import NotificationConfig
from framework.notifications.entries import (
    Entry,
    Key,
    TenantOf,
    batch_id_of,
    default_tenant_of,
    entry_from_row,
    notification_mutations,
)
from framework.notifications.reader import NotificationGap, NotificationReader, Position
from framework.notifications.schema import (
    BUCKETS_TABLE,
    DEFAULT_BUCKET_WIDTH,
    DEFAULT_RETENTION,
    DEFAULT_TENANT,
    NOTIFICATION_TABLE,
    NOTIFICATION_TABLES,
    bucket_of,
)

__all__ = [
    "NOTIFICATION_TABLE",
    "BUCKETS_TABLE",
    "NOTIFICATION_TABLES",
    "DEFAULT_BUCKET_WIDTH",
    "DEFAULT_RETENTION",
    "DEFAULT_TENANT",
    "Entry",
    "Key",
    "TenantOf",
    "NotificationConfig",
    "NotificationGap",
    "NotificationReader",
    "Position",
    "batch_id_of",
    "bucket_of",
    "default_tenant_of",
    "entry_from_row",
    "notification_mutations",
]
