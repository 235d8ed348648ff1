"""The notification tables and their time arithmetic (microseconds, like versions).

``converge_notifications``: partition ``(tenant, bucket)``, where ``bucket``
is the ingestion time truncated to the bucket width; clustering
``(ingested_at, app, batch_id, table_name)``, so a partition lists its
entries in ingestion order and writing one batch's entry again rewrites the
same row. ``converge_notification_buckets``: partition ``day`` (the UTC day
of the bucket), clustering ``(bucket, tenant)``, cell ``width`` (the bucket's): which
(tenant, bucket) partitions exist, so a reader finds them without scanning
the table and skips those that end before its checkpoint.
"""

from __future__ import annotations

from framework.core.schema import Column, TableSchema

__all__ = [
    "NOTIFICATION_TABLE",
    "BUCKETS_TABLE",
    "NOTIFICATION_TABLES",
    "DEFAULT_TENANT",
    "HOUR",
    "DAY",
    "DEFAULT_BUCKET_WIDTH",
    "DEFAULT_RETENTION",
    "check_bucket_width",
    "bucket_of",
    "day_of",
]

#: Microseconds in an hour and in a day.
HOUR = 3_600_000_000
DAY = 24 * HOUR
#: Default width of an ingestion bucket: one hour.
DEFAULT_BUCKET_WIDTH = HOUR
#: Default retention of notification entries: seven days, in seconds.
DEFAULT_RETENTION = 7 * 24 * 3600
#: The tenant of rows whose app declares none.
DEFAULT_TENANT = "-"

NOTIFICATION_TABLE = TableSchema(
    "converge_notifications",
    partition_key=(Column("tenant", "text"), Column("bucket", "bigint")),
    clustering_key=(
        Column("ingested_at", "bigint"),
        Column("app", "text"),
        Column("batch_id", "text"),
        Column("table_name", "text"),
    ),
    columns=(
        Column("last_modified", "bigint"),
        Column("inserted", "bigint"),
        Column("updated", "bigint"),
        Column("deleted", "bigint"),
        Column("keys", "text"),
        Column("reread", "boolean"),
    ),
)

BUCKETS_TABLE = TableSchema(
    "converge_notification_buckets",
    partition_key=(Column("day", "bigint"),),
    clustering_key=(Column("bucket", "bigint"), Column("tenant", "text")),
    columns=(Column("width", "bigint"),),
)

#: Every table a notification writer or reader needs.
NOTIFICATION_TABLES = (NOTIFICATION_TABLE, BUCKETS_TABLE)


def check_bucket_width(width: int) -> int:
    """``width`` if it is a positive number of microseconds dividing a day, else ValueError
    (so a bucket never spans two days of the bucket index)."""
    if isinstance(width, bool) or not isinstance(width, int) or width <= 0 or DAY % width:
        raise ValueError(f"bucket width must be a positive divisor of a day in microseconds, got {width!r}")
    return width


def bucket_of(at: int, width: int = DEFAULT_BUCKET_WIDTH) -> int:
    """The bucket (its start, in microseconds) of ingestion time ``at``."""
    return at - at % width


def day_of(at: int) -> int:
    """The UTC day (its start, in microseconds) of ``at``."""
    return at - at % DAY
