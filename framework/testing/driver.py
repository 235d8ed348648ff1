"""``Driver``: an app's events through the worker's own processing code, in memory, synchronously.

Each event goes the way the worker takes it, minus Kafka and the scheduler:
encoded to JSON as a producer sends it, parsed (``parse_event``), routed
(``App.route``; an event of a topic only lookups read, ``App.topic_of``, feeds their
entries), mapped with version marks and written by the worker's
``AgentProcessor`` (``map_event`` with the ID resolution of an app that declares ``id_mutation``:
events sent on its map topic feed the map; the store sink, with notification entries when the app has them on,
the change-feed sink),
then every change it announced is projected at once by the worker's
``ProjectionProcessor`` (``read_document`` + ``write_document``); an aggregate's
contributions go to its tables (``ContributionIndex``) and the groups they changed are
recomputed by the worker's ``TotalsProcessor``, each announcement at the next offset (windows
are final, and revisions counted, by the Driver's clock ``now``). The store
is ``SqliteStore(":memory:")`` with every table of ``app.tables``; the index
is a ``MemoryIndex``. A bad message is parked in ``parked`` (stage
``parse``, ``route``, ``map`` or ``sink``), never raised; a transient
failure (which the worker would retry) is raised. Not run: Kafka, the
keyed scheduler and its retries, the dead-letter WAL, delivery-ledger acks.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from framework.aggregates.contributions import NONE, Changed, ContributionIndex
from framework.aggregates.tables import decode_measures, tables_of
from framework.aggregates.totals import TotalsProcessor, group_records
from framework.core.aggregate import Aggregate, group_id, parse_series
from framework.core.events import Event, EventError, parse_event
from framework.core.mutations import Mutation
from framework.core.projection import Projection, mark_writers
from framework.core.rows import Row, cell_int
from framework.core.state_log import StateEntry, current_state
from framework.decoders.base import Record
from framework.idmutation.collapse import collapse
from framework.idmutation.requests import IdRequest
from framework.idmutation.resolution import IdMap, mapped_event, resolutions_for
from framework.notifications.entries import Entry, entry_from_row
from framework.notifications.schema import NOTIFICATION_TABLE, NOTIFICATION_TABLES
from framework.notifications.sink import store_sink
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.errors import MessageError
from framework.runtime.processor import AgentProcessor, Processor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.sinks import Sink
from framework.runtime.work import Work
from framework.state.entries import EntryTables
from framework.state.join import JoinBook
from framework.state.kv import MemoryKV
from framework.state.processor import JoinProcessor
from framework.testing.index import MemoryIndex
from stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from framework.app import App

__all__ = ["Driver", "Parked", "Message", "DEFAULT_NOW"]

T = TypeVar("T")
#: What ``send`` accepts: an event, or a raw message (JSON bytes or text) as Kafka would carry it
#: (or a ``framework.decoders.Record`` for the agent consuming its topic, read by its decoder).
Message = Event | bytes | str
#: The store's clock (epoch seconds) until a test moves ``Driver.now``.
DEFAULT_NOW = 1_700_000_000.0


class Parked(NamedTuple):
    """A bad message: what was sent (the raw message when it did not parse, else the event
    given to ``send`` or the change event of a projection), the stage and the cause."""

    event: Event | bytes
    stage: str
    error: BaseException


class Driver:
    """Runs ``app`` in memory; a synchronous API for tests (it owns its event loop).

    The store's clock is ``now`` (epoch seconds), fixed until a test moves it
    (to expire TTL cells), so two drivers given the same events store the
    same cells. Use it as a context manager or call ``close``; do not call it
    from inside a running event loop.
    """

    def __init__(self, app: App, *, now: float = DEFAULT_NOW) -> None:
        _not_in_a_loop()
        self.app = app
        self.now = now
        self.parked: list[Parked] = []
        self._runner = asyncio.Runner()
        self._closed = False
        self.store = SqliteStore(":memory:", clock=lambda: self.now)
        self.index = MemoryIndex()
        self._offsets = itertools.count()
        self._ingested = itertools.count()
        self._changes: list[tuple[str, bytes, bytes]] = []
        #: change records announced so far, per change topic
        self.announced: collections.Counter[str] = collections.Counter()
        self._agents: dict[str, AgentProcessor | JoinProcessor] = {}
        #: every lookup's entries (``framework.state``), fed by the events sent on its topic
        self.entries = EntryTables(app.lookups)
        self._projectors: dict[str, ProjectionProcessor] = {}
        self._totals: dict[str, TotalsProcessor] = {}
        #: the aggregates' contributions (the projector's target for them), for a job run against
        #: ``store`` (e.g. ``erase(..., aggregates=driver.aggregates)``): their groups' totals follow
        #: the erasure screen of an app that declares personal data (reloaded by every ``send``)
        self.screen = _screen_holder(app)
        self.aggregates = ContributionIndex(
            self.store, app.aggregates, self._announce_groups, screen=_group_screen(app, self.screen)
        )
        #: the ID map of an app that declares ``id_mutation``, fed by the events sent on its topic
        self.id_map = _id_map(app)
        self._map_batches = itertools.count(1)
        try:
            self.run(self._open())
        except BaseException:
            self.close()
            raise

    async def _open(self) -> None:
        app, timeout = self.app, self.app.runtime.sink_timeout
        for schema in app.tables:
            await self.store.ensure_table(schema)
        if app.notifications is not None:
            for schema in NOTIFICATION_TABLES:
                await self.store.ensure_table(schema)
        for p in app.projections:
            await self.index.ensure_index(p.alias, p.mappings)
        for a in app.aggregates:
            self._totals[app.group_topic(a)] = TotalsProcessor(a, self.store, timeout, clock=lambda: self.now)
        for view in app.views:  # a view sharing marks is projected with their owner too
            shared = [(p, self._target(p)) for p in app.sharing_marks(view)]
            self._projectors[app.change_topic(view)] = ProjectionProcessor(
                view, self.store, self._target(view), timeout, shared
            )
        resolutions = resolutions_for(app.id_mutation, app.agents, self.id_map)
        for agent in app.agents:
            resolve = resolutions.get(agent.name)
            projections = app.views_of(agent)
            sinks: list[Sink] = [store_sink(app, agent.name, self.store, clock=self._ingestion_clock)]
            if projections:
                feeds = app.change_feeds(agent)
                sinks.append(ChangeFeedSink(self._announce, feeds, dict.fromkeys(feeds, 1)))
            if agent.lookups:
                book = JoinBook(agent, MemoryKV(), self.entries.get, projections, app.joins)
                book.resolve = resolve
                book.screen = self.screen
                self._agents[agent.name] = JoinProcessor(agent, sinks, book, timeout, park=self._park_join)
            else:
                self._agents[agent.name] = AgentProcessor(
                    agent, sinks, timeout, projections, screen=self.screen, resolve=resolve
                )

    async def _park_join(self, partition: int, event: Event, raw: str, exc: MessageError) -> None:
        self.parked.append(Parked(event, exc.stage, exc.cause))
        await self._project()

    def _ingestion_clock(self) -> float:
        """``now`` plus one microsecond per call: each notified batch has its own ingestion time."""
        return self.now + next(self._ingested) / 1_000_000

    def _target(self, view: Projection) -> Any:
        """Where ``view``'s documents go: the aggregates' contributions or the index."""
        return self.aggregates if isinstance(view, Aggregate) else self.index

    async def _announce(self, topic: str, records: Sequence[ChangeRecord]) -> None:
        self._changes.extend((topic, key, value) for _, key, value in records)
        self.announced[topic] += len(records)

    async def _announce_groups(self, aggregate: Aggregate, changed: Sequence[Changed]) -> None:
        """Recompute the announced groups' totals now, each record at the next offset."""
        topic = self.app.group_topic(aggregate)
        for _, key, value in group_records(aggregate, changed, 1):
            work = Work((topic, 0), next(self._offsets), key, value)
            await self._attempt(self._totals[topic], work, parse_event(value))

    # -- sending --------------------------------------------------------------
    def send(
        self, events: Message | Record | Iterable[Message | Record], *, topic: str | None = None
    ) -> list[Parked]:
        """Process each message in turn; return the ones parked by this call. A ``Record`` goes to
        the agent consuming its topic (or ``topic``), decoded by that agent's ``decoder``.

        ``topic`` routes every message to the agent consuming it, or feeds the lookups of a
        topic only lookups read (default: by event type, ``App.topic_of``).
        """
        batch = [events] if isinstance(events, Event | bytes | bytearray | str | Record) else list(events)
        before = len(self.parked)
        if self.screen is not None:
            self.run(self.screen.refresh(self.store))
        for message in batch:
            self.run(self._deliver(message, topic))
        return self.parked[before:]

    async def _deliver(self, message: Message | Record, topic: str | None) -> None:
        if isinstance(message, Record):
            await self._deliver_record(message, topic)
            return
        raw = _encode(message)
        sent: Event | bytes = message if isinstance(message, Event) else raw
        try:
            event = parse_event(raw)
        except EventError as exc:
            self.parked.append(Parked(sent, "parse", exc))
            return
        sent = message if isinstance(message, Event) else event
        if self.id_map is not None and topic == self.id_map.topic:
            self.id_map.feed(event)  # the ID map: later events resolve through it
            return
        try:
            on = topic if topic is not None else self.app.topic_of(event)
            if self.entries.on(on) and not self.app.consumed_by_agent(on):
                await self._entries(on, event)  # a topic only lookups read
                return
            agent = self.app.route(event, topic)
        except EventError as exc:
            self.parked.append(Parked(sent, "route", exc))
            return
        work = Work((agent.topic, 0), next(self._offsets), event.ordering_key.encode(), raw)
        await self._attempt(self._agents[agent.name], work, sent)
        await self._project()
        await self._entries(agent.topic, event)

    async def _deliver_record(self, record: Record, topic: str | None) -> None:
        """A record for the agent consuming ``topic`` (default: the record's), decoded by the agent's
        decoder (``KeyedAgent.decoder``) as the worker decodes it; parked at ``parse`` when it does not."""
        on = topic or record.topic
        agent = next((a for a in self.app.agents if a.topic == on), None)
        if agent is None:
            error = EventError("topic", f"no agent of {self.app.name} consumes {on!r}")
            self.parked.append(Parked(record.value or b"", "route", error))
            return
        work = Work((agent.topic, 0), next(self._offsets), record.key, record.value)
        work.timestamp, work.headers = record.timestamp, record.headers
        await self._attempt(self._agents[agent.name], work, record.value or b"")  # parked: its value
        await self._project()

    async def _entries(self, topic: str, event: Event) -> None:
        """Feed the lookups of ``topic`` with ``event``; map again the events that read what changed."""
        changed = self.entries.feed(topic, event)
        if changed:
            for processor in self._agents.values():
                if isinstance(processor, JoinProcessor):
                    await processor.remap(changed)
            await self._project()

    def id_job(self, requests: Iterable[IdRequest], *, apply: bool = True, publish: bool = True) -> None:
        """Run the ID mutation job's effect on ``requests`` (every request known so far): collapse
        them, move the owner tables' cells in the store (``apply``: ``apply_id_map``) and feed the
        entries to the stream's map (``publish``: as the map topic would, at a new batch version)."""
        config = self.app.id_mutation
        if config is None or self.id_map is None:
            raise RuntimeError(f"app {self.app.name} declares no id_mutation")
        from framework.idmutation.apply import Apply, apply_id_map

        collapsed = collapse(requests)
        if apply:
            owners = {c.table for c in config.columns}
            marks = mark_writers(p for p in self.app.views if p.source_names & owners)

            async def extra(apply: Apply, writes: Sequence[Mutation], moves: Sequence[Mutation]) -> None:
                await apply([*writes, *(mark for p in marks for mark in p.version_marks(moves))])

            erased = None
            if self.screen is not None:  # an erased subject's recorded cells are not routed again
                self.run(self.screen.refresh(self.store))
                erased = self.screen.current.verdict if self.screen.current is not None else None
            applied = apply_id_map(
                self.store, config, collapsed, clock=lambda: self.now, extra=extra, erased=erased
            )
            report = self.run(applied)
            # the documents of the partitions the moves touched, old and final ids (a view sharing
            # marks is projected with the view it shares them with)
            for p in (v for v in self.app.views if v.source_names & owners and v.marks_from is None):
                keys = [{c.name: key[c.name] for c in p.partition_key} for table, key in report.touched
                        if table in p.source_names]  # fmt: skip
                self.run(self._projectors[self.app.change_topic(p)]._project(keys))  # noqa: SLF001
        if publish:
            version = next(self._map_batches)
            for (tenant, ident), intervals in collapsed.items():
                self.id_map.feed(mapped_event(tenant, ident, intervals, version))

    def pending(self) -> dict[str, list[tuple[str, str, str]]]:
        """Events waiting for a lookup entry, per agent: ``(event_id, lookup, key)``."""
        return {
            name: [(eid, lk, key) for _, eid, lk, key, _ in p.book.pending()]
            for name, p in self._agents.items()
            if isinstance(p, JoinProcessor)
        }

    async def _project(self) -> None:
        while self._changes:
            change_topic, key, value = self._changes.pop(0)
            change = Work((change_topic, 0), next(self._offsets), key, value)
            await self._attempt(self._projectors[change_topic], change, parse_event(value))

    async def _attempt(self, processor: Processor, work: Work, sent: Event | bytes) -> None:
        processor.prepare(work)
        try:
            await processor(work)
        except MessageError as exc:
            self.parked.append(Parked(sent, exc.stage, exc.cause))

    # -- reading --------------------------------------------------------------
    def rows(self, table: str) -> list[Row]:
        """Every live row of ``table``, in key order."""
        return sorted(self.run(self._scan(table)), key=lambda r: tuple(r.key.values()))

    async def _scan(self, table: str) -> list[Row]:
        return [row async for row in self.store.scan(table)]

    def row(self, table: str, key: Mapping[str, Any]) -> Row | None:
        """The row at the full primary ``key``; None when it has no live cell."""
        return self.run(self.store.read_row(table, key))

    def partition(self, table: str, partition_key: Mapping[str, Any]) -> list[Row]:
        """The live rows of one partition, in clustering order."""
        return self.run(self.store.read_partition(table, partition_key))

    def notifications(self) -> list[Entry]:
        """The notification entries written so far (``App(notifications=...)``), in reading order."""
        if self.app.notifications is None:
            raise RuntimeError(f"app {self.app.name} has notifications off")
        entries = (entry_from_row(r) for r in self.rows(NOTIFICATION_TABLE.name))
        return sorted(entries, key=lambda e: e.position)

    def state(
        self, table: str, partition_key: Mapping[str, Any], precedence: Sequence[str]
    ) -> StateEntry | None:
        """The current state of one state log partition (``current_state``)."""
        return current_state(self.partition(table, partition_key), precedence)

    def totals(self, aggregate: str | Aggregate) -> dict[str, dict[str, float]]:
        """``{group id: totals}`` of an aggregate (by object or name): what its ``_totals`` table holds.

        A group id is the compact JSON (no spaces, ASCII) of the window start (epoch seconds; 0
        when the aggregate has no window) followed by the group-key values in ``group_by`` order:
        ``'[0,"red","open"]'`` for ``group_by = ("team", "status")`` unwindowed,
        ``'[1710979200,"org-0000","lead-01"]'`` for a window starting at 1710979200
        (``framework.core.aggregate.group_id`` builds one, ``parse_group_id`` reads one). The
        totals map each measure to its value; a group with no contributions left has no entry.
        ``revisions`` and ``contributions`` use the same ids."""
        agg = aggregate if isinstance(aggregate, Aggregate) else self.app.aggregate(aggregate)
        return {
            _group_of(r): decode_measures(r.cells["measures"].value)
            for r in self.rows(tables_of(agg).totals.name)
            if "measures" in r.cells  # not a window emptied after it was final (its revisions only)
        }

    def revisions(self, aggregate: str | Aggregate) -> dict[str, int]:
        """``{group id: revisions}`` of an aggregate's windows revised while final (count above 0)."""
        agg = aggregate if isinstance(aggregate, Aggregate) else self.app.aggregate(aggregate)
        counts = {_group_of(r): cell_int(r.cells["revisions"].value)
                  for r in self.rows(tables_of(agg).totals.name) if "revisions" in r.cells}  # fmt: skip
        return {g: n for g, n in counts.items() if n}

    def contributions(self, aggregate: str | Aggregate) -> dict[str, dict[str, dict[str, float]]]:
        """``{entity id: {group id: measures}}`` of an aggregate: what its ``_contrib`` table holds
        (group ids as in ``totals``)."""
        agg = aggregate if isinstance(aggregate, Aggregate) else self.app.aggregate(aggregate)
        out: dict[str, dict[str, dict[str, float]]] = {}
        for r in self.rows(tables_of(agg).contrib.name):
            if r.cells["measures"].value == NONE:  # a group the entity left
                continue
            gid = _group_of(r)
            out.setdefault(str(r.key["entity"]), {})[gid] = decode_measures(r.cells["measures"].value)
        return out

    def documents(self, projection: str | Projection) -> dict[str, tuple[dict[str, Any], int]]:
        """``{doc_id: (document, version)}`` of a projection (by object, name or alias) or of any
        index alias, after a refresh."""
        alias = projection.alias if isinstance(projection, Projection) else projection
        if isinstance(projection, str):
            try:
                alias = self.app.projection(projection).alias
            except KeyError:
                pass
        return self.run(self._documents(alias))

    async def _documents(self, alias: str) -> dict[str, tuple[dict[str, Any], int]]:
        await self.index.refresh(alias)
        return {h.doc_id: (dict(h.source), int(h.version or 0)) async for h in self.index.scan(alias)}

    # -- the loop ---------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the driver's event loop (e.g. a call on ``store`` or ``index``)."""
        try:
            _not_in_a_loop()
        except RuntimeError:
            coro.close()
            raise
        return self._runner.run(coro)

    def close(self) -> None:
        """Close the store, the index and the event loop (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self._close())
        finally:
            self._runner.close()

    async def _close(self) -> None:
        await self.index.close()
        await self.store.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _group_of(row: Row) -> str:
    """The group id of a ``_contrib`` or ``_totals`` row."""
    return group_id(parse_series(str(row.key["series"])), int(str(row.key["window"])))


def _group_screen(app: App, holder: Any) -> Any:
    """The erased groups' test of ``holder``'s screen for the contributions (None: none to screen)."""
    if holder is None:
        return None
    from framework.erasure.groups import group_screen

    return group_screen(app, holder)


def _screen_holder(app: App) -> Any:
    """The erasure screen holder of ``app`` (None when it declares no personal data)."""
    if not app.personal_data:
        return None
    from framework.erasure.keyed import erasure_key
    from framework.erasure.screen import ScreenHolder

    return ScreenHolder(app, erasure_key(required=False))


def _id_map(app: App) -> IdMap | None:
    """The in-memory ID map of ``app`` (None when it declares no ``id_mutation``)."""
    return IdMap(app.name) if app.id_mutation is not None else None


def _not_in_a_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError("Driver is synchronous: use it outside a running event loop (not in an async test)")


def _encode(message: Message) -> bytes:
    if isinstance(message, Event):
        try:
            return message.to_json()
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"event {message.event_id} does not encode to JSON, as Kafka needs: {exc}"
            ) from exc
    if isinstance(message, str):
        return message.encode("utf-8", "surrogatepass")
    if isinstance(message, bytes | bytearray):
        return bytes(message)
    raise TypeError(f"send takes Events or raw messages (bytes, str), got {type(message).__name__}")
