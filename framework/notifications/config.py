"""``NotificationConfig``: how an app's writers record notifications; ``NotifyingApp``: an app as
they read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from framework.core.app_model import AppModel
from framework.notifications.entries import TenantOf
from framework.notifications.schema import DEFAULT_BUCKET_WIDTH, DEFAULT_RETENTION, check_bucket_width

__all__ = ["NotificationConfig", "NotifyingApp"]


@dataclass(frozen=True)
class NotificationConfig:
    """Notifications of an app's writes (``App(..., notifications=NotificationConfig())``).

    - ``tenant_of(table, key)``: a row's tenant; default: its key column ``org_id``,
      ``tenant`` or ``tenant_id``, else the single tenant ``-``;
    - ``bucket_width``: microseconds of an ingestion bucket (divides a day; default 1 h);
    - ``max_keys``: most keys one entry lists; more go in further entries, and past
      ``entries.MAX_PARTS`` of them (or at 0) one entry says re-read;
    - ``retention``: seconds entries are kept (they expire by TTL, one hour later);
      readers must not use a longer retention than the writers;
    - ``count_inserts``: read which rows exist before each batch, to count inserted
      apart from updated (one ``read_rows`` per table and batch: it costs, see
      BENCHMARKS.md); off (the default): an upsert counts as updated, a new state-log
      row as inserted, as any blind writer counts;
    - ``late_after``: seconds within which an entry's write must end after its stamp, or
      it is written again at a fresh stamp (``framework.notifications.stamping``); readers'
      ``settle`` must exceed it plus how far a writer's clock may lag a reader's.
    """

    tenant_of: TenantOf | None = None
    bucket_width: int = DEFAULT_BUCKET_WIDTH
    max_keys: int = 1000
    retention: int = DEFAULT_RETENTION
    count_inserts: bool = False
    late_after: float = 10.0

    def __post_init__(self) -> None:
        check_bucket_width(self.bucket_width)
        if isinstance(self.max_keys, bool) or not isinstance(self.max_keys, int) or self.max_keys < 0:
            raise ValueError(f"max_keys must be a non-negative int, got {self.max_keys!r}")
        if isinstance(self.retention, bool) or not isinstance(self.retention, int) or self.retention <= 0:
            raise ValueError(f"retention must be a positive int of seconds, got {self.retention!r}")
        if (
            isinstance(self.late_after, bool)
            or not isinstance(self.late_after, int | float)
            or not (0 < self.late_after < float("inf"))
        ):
            raise ValueError(f"late_after must be a positive number of seconds, got {self.late_after!r}")

    @property
    def ttl(self) -> int:
        """Seconds an entry lives: the retention and one hour, so a reader at the edge still sees it."""
        return self.retention + 3600


class NotifyingApp(AppModel, Protocol):
    """An ``AppModel`` with its notifications (None: off)."""

    @property
    def notifications(self) -> NotificationConfig | None: ...
