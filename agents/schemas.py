"""Tables of the reference activity platform.

``activity_hub`` holds one row per activity (email or meeting): the main
record's cells and the augmented cells (insights, sharing) that other
pipelines upsert into the same row by natural key. ``engagement_log`` is the
state log of recipient engagement, one partition per hub row.
``owner_activity`` lists the activities of one CRM owner (a lead or contact
id) per organisation, partitioned by ``(org_id, owner_id)``: the owner table
of ID mutation (a lead converted into a contact, two records merged, a record
deleted moves or removes its rows).
"""

from __future__ import annotations

from framework.core.schema import Column, TableSchema, state_log_schema

__all__ = [
    "ACTIVITY_HUB",
    "ENGAGEMENT_LOG",
    "OWNER_ACTIVITY",
    "IDENTITY_COLUMNS",
    "RECORD_COLUMNS",
    "INSIGHT_COLUMNS",
    "TABLES",
    "join_addresses",
    "split_addresses",
]

#: Written by every pipeline that touches a hub row (derived from the key's inputs).
IDENTITY_COLUMNS: tuple[Column, ...] = (
    Column("org_id", "text"),
    Column("source", "text"),
    Column("external_id", "text"),
)
#: The main record, written by the activities pipeline; ``kind`` marks its presence.
RECORD_COLUMNS: tuple[Column, ...] = (
    Column("kind", "text"),
    Column("subject", "text"),
    Column("body_preview", "text"),
    Column("participants", "text"),  # sorted, de-duplicated, lower-case, comma-joined
    Column("starts_at", "bigint"),  # microseconds; an email's sent time
    Column("ends_at", "bigint"),  # microseconds; meetings only
    Column("status", "text"),  # sent | scheduled | rescheduled
)
#: Augmented cells, written by the insights pipeline.
INSIGHT_COLUMNS: tuple[Column, ...] = (
    Column("sentiment", "text"),
    Column("topic", "text"),
    Column("next_step", "text"),
    Column("score", "double"),
    Column("shared_with", "text"),  # like participants; absent when shared with nobody
)

ACTIVITY_HUB = TableSchema(
    name="activity_hub",
    partition_key=(Column("hub_id", "text"),),
    columns=IDENTITY_COLUMNS + RECORD_COLUMNS + INSIGHT_COLUMNS,
)

ENGAGEMENT_LOG = state_log_schema(
    "engagement_log",
    partition_key=(Column("hub_id", "text"),),
    attrs=(Column("actor", "text"),),
)

OWNER_ACTIVITY = TableSchema(
    name="owner_activity",
    partition_key=(Column("org_id", "text"), Column("owner_id", "text")),
    clustering_key=(Column("hub_id", "text"),),
    columns=(Column("kind", "text"), Column("created_at", "bigint")),
)

TABLES: tuple[TableSchema, ...] = (ACTIVITY_HUB, ENGAGEMENT_LOG, OWNER_ACTIVITY)


def join_addresses(addresses: tuple[str, ...]) -> str | None:
    """The cell value of an address list (already normalised); None when empty."""
    return ",".join(addresses) if addresses else None


def split_addresses(cell: str | None) -> list[str]:
    """The address list stored in a cell."""
    return cell.split(",") if cell else []
