"""The activity platform's engagement metrics, declared as aggregates (``framework.Aggregate``).

Both count per calendar day (UTC) of an event time the activity itself carries, in tumbling
one-day windows, never by the processing clock:

- ``OwnerDaily`` (``owner_daily``): per CRM owner (``org_id``, ``owner_id``: the lead or contact
  an activity is logged against) and day of the activity's creation in its source
  (``owner_activity.created_at``): the emails sent and the meetings booked. The entity is one
  owner's ``owner_activity`` partition, so an ID mutation that moves an owner's rows to its
  final id moves its counts too; a meeting re-created after a cancellation counts on the day of
  its re-creation. An owner is a person: ``owner_id`` is personal data (``personal``, kind
  ``owner``), so ``converge erase --subject owner:ID`` removes the owner's groups, every day of
  them, for good (``personal.py``).
- ``EngagementDaily`` (``engagement_daily``): per organisation (``org_id``) and kind
  (``email`` or ``meeting``), and day of the activity's ``starts_at`` (an email's sent time, a
  meeting's start): ``activities`` (emails sent, meetings held), and of those emails how many
  were ``opened`` and ``replied`` to (an ``opened`` or ``replied`` row in the engagement log).
  The entity is one hub row with its engagement log: a rescheduled meeting moves to the day it
  now starts on, a cancelled or erased activity leaves its day. A day is final for readers two
  days after it ends (``final_after_s``); an open or reply recorded later revises it. An
  organisation sends many emails a day, so each group's total is reduced from 4 buckets
  (``buckets``).

What the tables do not hold, and the nearest fact used instead:

- The hub row does not name its owner (only ``owner_activity`` does, in another partition), so
  the per-owner counts are those ``owner_activity`` holds (kind and creation time); opens,
  replies and held meetings are counted per organisation.
- A cancelled meeting leaves no live cell: a cancellation is a row tombstone of the hub row
  (``agents.activities``), not a status. The tables keep a meeting's ``owner_activity`` row
  after a cancellation, so ``owner_daily.meetings`` counts meetings booked, cancelled or not,
  and ``engagement_daily`` only the meetings still on. Summed over an organisation's owners and
  days, the difference is the meetings cancelled or erased (an erasure deletes hub rows, not
  ``owner_activity`` rows), as long as no ID mutation deleted an owner with its rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from agents.schemas import ACTIVITY_HUB, ENGAGEMENT_LOG, OWNER_ACTIVITY
from framework import Aggregate, Contribution, Row, TableSchema, Window

__all__ = ["DAY_S", "MICROS", "OwnerDaily", "EngagementDaily", "AGGREGATES"]

#: Seconds in a day: the windows' size.
DAY_S = 86_400
#: Microseconds in a second (the platform's times are integer microseconds).
MICROS = 1_000_000


def _seconds(micros: Any) -> int:
    """Whole epoch seconds of a time in microseconds (floor): a day is an exact range of them."""
    return int(micros) // MICROS


class OwnerDaily(Aggregate):
    """Emails sent and meetings booked per CRM owner and day of creation (``owner_activity``)."""

    name: ClassVar[str] = "owner_daily"
    tables: ClassVar[tuple[TableSchema, ...]] = (OWNER_ACTIVITY,)
    group_by: ClassVar[tuple[str, ...]] = ("org_id", "owner_id")
    measures = {"emails": "sum", "meetings": "sum"}
    window: ClassVar[Window | None] = Window(DAY_S)
    personal: ClassVar[Mapping[str, str]] = {"owner_id": "owner"}

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        days: dict[int, dict[str, float]] = {}
        for row in rows[OWNER_ACTIVITY.name]:
            cells = row.values()
            kind, created = cells.get("kind"), cells.get("created_at")
            if kind not in ("email", "meeting") or created is None:
                continue
            day = _seconds(created) // DAY_S * DAY_S
            counts = days.setdefault(day, {"emails": 0, "meetings": 0})
            counts["emails" if kind == "email" else "meetings"] += 1
        group = {"org_id": key["org_id"], "owner_id": key["owner_id"]}
        return [Contribution(group, counts, at=day) for day, counts in sorted(days.items())]


class EngagementDaily(Aggregate):
    """Emails sent, opened and replied to, and meetings held, per organisation, kind and day."""

    name: ClassVar[str] = "engagement_daily"
    tables: ClassVar[tuple[TableSchema, ...]] = (ACTIVITY_HUB, ENGAGEMENT_LOG)
    #: the ``activities`` projection reads the same tables: one version mark per change, not two
    marks_from: ClassVar[str | None] = "activities"
    group_by: ClassVar[tuple[str, ...]] = ("org_id", "kind")
    measures = {"activities": "count", "opened": "sum", "replied": "sum"}
    window: ClassVar[Window | None] = Window(DAY_S)
    final_after_s: ClassVar[float | None] = 2 * DAY_S
    buckets: ClassVar[int] = 4

    def contribute(self, key: Mapping[str, Any], rows: Mapping[str, Sequence[Row]]) -> Iterable[Contribution]:
        hub = [r.values() for r in rows[ACTIVITY_HUB.name] if r.cells]
        if not hub:
            return []
        cells = hub[0]
        kind, starts = cells.get("kind"), cells.get("starts_at")
        if kind not in ("email", "meeting") or starts is None or cells.get("org_id") is None:
            return []
        measures: dict[str, float] = {}
        if kind == "email":
            states = {r.values().get("state") for r in rows[ENGAGEMENT_LOG.name]}
            measures = {"opened": int("opened" in states), "replied": int("replied" in states)}
        return [Contribution({"org_id": cells["org_id"], "kind": kind}, measures, at=_seconds(starts))]


#: The aggregates the app declares.
AGGREGATES: tuple[Aggregate, ...] = (OwnerDaily(), EngagementDaily())
