"""``NotificationSink``: the store sink that also records what each micro-batch changed.

Per call (a micro-batch, or one event on the per-key path) it reads which
written rows exist already (``count_inserts``: one ``read_rows`` per table),
then applies the batch's mutations and its notification entries in one
``apply``: on SQLite one transaction, so an entry is never without its data.
The batch id is the agent's name and a digest of the batch's event ids; the
ingestion time is the writer's clock when the batch is written, and a write that
ended more than ``late_after`` seconds later is followed by the entries again at a
fresh time (``framework.notifications.stamping``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence

from framework.core.events import Event
from framework.core.mutations import CellValue, Mutation
from framework.core.rows import cell_int
from framework.notifications.config import NotificationConfig, NotifyingApp
from framework.notifications.entries import (
    Key,
    RowChange,
    batch_id_of,
    changed_rows,
    entry_mutations,
    notification_mutations,
)
from framework.notifications.schema import BUCKETS_TABLE, NOTIFICATION_TABLE
from framework.notifications.stamping import write_stamped
from framework.runtime.sinks import Sink, WideColumnSink, Written
from stores.base import WideColumnStore

__all__ = ["NotificationSink", "store_sink", "write_notifications"]

Existed = Callable[[str, Mapping[str, CellValue]], bool]


class NotificationSink:
    """Writes an agent's mutations to ``store`` with one notification entry per (tenant,
    bucket, table) of each batch, as app ``app_name``; batch ids start with ``prefix``. Writes
    to the ``unannounced`` tables (bookkeeping, such as projections' version marks) get none."""

    name = "wide_column"  # the store's sink: one store, one back-off

    def __init__(
        self,
        store: WideColumnStore,
        app_name: str,
        config: NotificationConfig,
        *,
        prefix: str,
        clock: Callable[[], float] = time.time,
        unannounced: Collection[str] = (),
    ) -> None:
        self.store, self.app_name, self.config = store, app_name, config
        self.prefix, self.clock = prefix, clock
        self.unannounced = frozenset(unannounced)
        self._indexed: set[tuple[str, int]] = set()  # bucket-index rows this sink wrote

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        await self.write_batch([(event, mutations)])

    async def write_batch(self, batch: Sequence[Written]) -> None:
        data = [m for _, ms in batch for m in ms]
        if not data:
            return
        rows = changed_rows(m for m in data if m.table not in self.unannounced)
        live = await self._live(rows) if self.config.count_inserts and rows else None
        c = self.config
        batch_id = batch_id_of(self.prefix, (e.event_id for e, _ in batch))
        written: list[Mutation] = []  # the index rows of every attempt

        def notes(at: int) -> list[Mutation]:
            made = entry_mutations(self.app_name, batch_id, rows, c.tenant_of, at, c.max_keys,
                                   bucket_width=c.bucket_width, live=live, ttl=c.ttl)  # fmt: skip
            index = [m for m in made if m.table == BUCKETS_TABLE.name]
            fresh = [m for m in index if (m.key["tenant"], m.key["bucket"]) not in self._indexed]
            written.extend(fresh)
            return [*(m for m in made if m.table != BUCKETS_TABLE.name), *fresh]

        await write_stamped(self.store.apply, notes, self.clock, c.late_after, data)
        if written:  # an index row once per tenant and bucket (its cells never change)
            current = max(cell_int(m.key["bucket"]) for m in written)
            self._indexed = {k for k in self._indexed if k[1] >= current}
            self._indexed.update((str(m.key["tenant"]), cell_int(m.key["bucket"])) for m in written)

    async def _live(self, rows: Mapping[tuple[str, str], RowChange]) -> set[tuple[str, str]]:
        """Which written rows had a live row before the batch: one ``read_rows`` per table."""
        wanted: dict[str, list[tuple[str, Key]]] = {}
        for (table, ident), (_, _, kind, key) in rows.items():
            if kind != "delete":
                wanted.setdefault(table, []).append((ident, key))
        live: set[tuple[str, str]] = set()
        for table, keys in wanted.items():
            found = await self.store.read_rows(table, [k for _, k in keys])
            live.update(
                (table, ident) for (ident, _), row in zip(keys, found, strict=True) if row is not None
            )
        return live


def store_sink(
    app: NotifyingApp, agent: str, store: WideColumnStore, clock: Callable[[], float] = time.time
) -> Sink:
    """The store sink of ``app``'s agent ``agent``: a ``NotificationSink`` when the app has
    notifications on (projections' and aggregates' version marks unannounced), else a plain
    ``WideColumnSink``."""
    if app.notifications is None:
        return WideColumnSink(store)
    marks = {p.version_table.name for p in app.views}
    return NotificationSink(store, app.name, app.notifications, prefix=agent, clock=clock, unannounced=marks)


async def write_notifications(
    store: WideColumnStore,
    app: NotifyingApp,
    batch_id: str,
    written: Sequence[Mutation],
    clock: Callable[[], float] = time.time,
) -> int:
    """Apply the notification entries of ``written`` (already durable) as ``app``'s batch
    ``batch_id``, ingested now (again later when the write was late: ``write_stamped``),
    counted blind (no read); the number of entries. For batch writers such as the Spark
    backfill; nothing when the app has notifications off."""
    c = app.notifications
    if c is None:
        return 0
    marks = {p.version_table.name for p in app.views}
    changed = [m for m in written if m.table not in marks]

    def notes(at: int) -> list[Mutation]:
        return notification_mutations(app.name, batch_id, changed, c.tenant_of, at, c.max_keys,
                                      bucket_width=c.bucket_width, ttl=c.ttl)  # fmt: skip

    at = await write_stamped(store.apply, notes, clock, c.late_after)
    return sum(1 for m in notes(at) if m.table == NOTIFICATION_TABLE.name)
