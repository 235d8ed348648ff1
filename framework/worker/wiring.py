"""Wires an ``App`` into a Faust app: topics, runtimes, sinks, change feeds, projectors and
aggregates' totals (``build_worker``: the Faust app of an ``App``, wired)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from framework.aggregates.contributions import Changed, ContributionIndex
from framework.aggregates.totals import TotalsProcessor, group_records
from framework.app import App
from framework.core.aggregate import Aggregate
from framework.core.projection import Projection
from framework.kafka_admin import end_offsets, ensure_topics
from framework.notifications.schema import NOTIFICATION_TABLES
from framework.notifications.sink import store_sink
from framework.runtime.binding import AgentRuntime, register_dlq_rotation
from framework.runtime.change_feed import ChangeFeedSink, ChangeRecord
from framework.runtime.dedupe import DuplicateFilter
from framework.runtime.processor import AgentProcessor, Processor
from framework.runtime.projector import ProjectionProcessor
from framework.runtime.sinks import Sink
from framework.settings import Settings
from framework.state.dedupe import DedupedJoin
from framework.state.worker import JoinWiring
from framework.worker.denylist import denylist_settler
from framework.worker.dlq_retention import register_dlq_retention
from framework.worker.faust_app import ConvergeFaustApp, create_faust_app
from framework.worker.resources import Resources
from framework.worker.verifying import WorkerVerifier
from stores.base import SearchIndex

__all__ = ["Wiring", "wire", "build_worker"]


@dataclass(frozen=True)
class Wiring:
    """What ``wire`` set up on a worker: its resources and one runtime per agent and projector."""

    resources: Resources
    runtimes: tuple[AgentRuntime, ...]
    #: the change verifier of a worker with the ``verify`` setting (None without)
    verifier: WorkerVerifier | None = None

    def status(self) -> dict[str, Any]:
        """Every runtime's ``status()``, by runtime name."""
        return {r.name: r.status() for r in self.runtimes}


def build_worker(app: App, settings: Settings | None = None) -> ConvergeFaustApp:
    """The Faust app that runs every agent and projector of ``app`` (settings from the
    environment when not given); with a ``web_port`` it serves Prometheus metrics and the
    interactive queries (``framework.aggregates.http``)."""
    settings = settings or Settings.resolve(app.name)
    worker = create_faust_app(settings)
    worker.converge = wire(app, worker, settings)
    if settings.web_port is not None:  # its web server is on: serve GET /metrics and /query there too
        from framework.aggregates.http import mount_queries
        from framework.metrics import mount_metrics

        mount_metrics(worker)
        mount_queries(worker, app.views)
    return worker


def wire(app: App, worker: ConvergeFaustApp, settings: Settings) -> Wiring:
    """Register one runtime per agent and per projection on ``worker``; open the resources
    and attach the processors when the worker starts, close them when it has stopped."""
    resources = Resources(app, settings)
    timeout = app.runtime.sink_timeout
    agents = [(AgentRuntime(worker, a.topic, config=app.runtime, name=a.name), a) for a in app.agents]
    projectors = [
        (AgentRuntime(worker, app.change_topic(p), config=app.runtime, name=f"project.{p.name}"), p)
        for p in app.views
    ]
    totals = [
        (AgentRuntime(worker, app.group_topic(a), config=app.runtime, name=f"totals.{a.name}"), a)
        for a in app.aggregates
    ]
    change_topics = {
        name: worker.topic(
            name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
        )
        for name in [*map(app.change_topic, app.views), *map(app.group_topic, app.aggregates)]
    }

    async def announce(topic: str, records: Sequence[ChangeRecord]) -> None:
        sent = [await change_topics[topic].send(key=k, value=v, partition=p) for p, k, v in records]
        await asyncio.gather(*sent)  # on the broker before the source events are acknowledged

    async def announce_groups(aggregate: Aggregate, changed: Sequence[Changed]) -> None:
        topic = app.group_topic(aggregate)
        await announce(topic, group_records(aggregate, changed, counts[topic]))

    filters: list[DuplicateFilter] = []
    counts: dict[str, int] = {}  # partitions of each change and group topic, once they exist

    screens = _screen_holder(app, worker, resources)
    denylist = denylist_settler(app, worker, settings, resources)  # erasure's deny-list of record
    joins = JoinWiring(app, worker, settings) if app.lookups else None  # lookups (framework.state)
    id_map = _id_map_feed(app, settings)  # ID mutation: owner ids resolved through the map
    verifier = WorkerVerifier(app, settings) if settings.verify is not None else None

    topics_extra = {**(joins.topics() if joins else {}), **(id_map.topics() if id_map else {})}

    async def starting() -> None:
        topics = {t: settings.partitions for t in app.topics()}
        await ensure_topics(settings.broker, {**topics, **topics_extra})
        if joins is not None:
            await joins.open()
        if id_map is not None:
            await id_map.open()
        resolutions = id_map.resolutions() if id_map is not None else {}
        counts.update({t: len(await end_offsets(settings.broker, t)) for t in change_topics})
        await resources.open()
        if denylist is not None:  # before the first event: refused without a deny-list to screen with
            await denylist.start(resources.store)
        if screens is not None:
            await screens.refresh(resources.store)
        if app.notifications is not None:
            for schema in NOTIFICATION_TABLES:
                await resources.store.ensure_table(schema)
        dlq = resources.dlq
        assert dlq is not None
        for runtime, agent in agents:
            projections = app.views_of(agent)
            sinks: list[Sink] = [store_sink(app, agent.name, resources.store)]
            if projections:
                sinks.append(ChangeFeedSink(announce, app.change_feeds(agent), counts))
            if resources.ledger is not None:
                from framework.delivery.acks import delivery_sinks

                sinks += delivery_sinks(agent, resources.ledger)
            dedupe = None
            if app.runtime.dedupe is not None:
                dedupe = DuplicateFilter(settings.data_dir / "dedupe" / agent.name, app.runtime.dedupe)
                filters.append(dedupe)
            resolve = resolutions.get(agent.name)
            processor: Processor = AgentProcessor(
                agent, sinks, timeout, projections, dedupe, screens, resolve,
                map_ahead=settings.store_writer == "process",  # the writes run beside this process
            )  # fmt: skip
            if joins is not None and agent.lookups:
                joined = joins.processor(agent, sinks, timeout, projections, runtime)
                joined.book.resolve = resolve
                joined.book.screen = screens  # the erasure screen, after the resolution (map_event's order)
                processor = joined if dedupe is None else DedupedJoin(joined, dedupe)
            runtime.attach(processor, dlq)
        contributions = ContributionIndex(
            resources.store, app.aggregates, announce_groups, screen=_group_screen(app, screens)
        )

        def target(view: Projection) -> SearchIndex:
            return contributions if isinstance(view, Aggregate) else resources.index

        for runtime, view in projectors:  # a view sharing marks is projected with their owner too
            shared = [(p, target(p)) for p in app.sharing_marks(view)]
            processor = ProjectionProcessor(view, resources.store, target(view), timeout, shared)
            runtime.attach(processor, dlq)
        for runtime, aggregate in totals:
            runtime.attach(TotalsProcessor(aggregate, resources.store, timeout), dlq)
        if verifier is not None:
            index = resources.index if app.projections else None
            await verifier.start(resources.store, index, contributions, dlq)
        if joins is not None:
            joins.start_feed()
        if id_map is not None:
            id_map.start()

    async def stopped() -> None:
        if verifier is not None:
            await verifier.stop()
        if joins is not None:
            await joins.close()
        if id_map is not None:
            await id_map.close()
        if denylist is not None:
            await denylist.close()
        await resources.close()
        for f in filters:
            f.close()

    worker.starting.append(starting)
    worker.stopped.append(stopped)
    register_dlq_rotation(worker, lambda: resources.dlq)
    register_dlq_retention(worker, lambda: resources.dlq, settings)  # CONVERGE_DLQ_RETENTION
    runtimes = [r for r, _ in agents] + [r for r, _ in projectors] + [r for r, _ in totals]
    return Wiring(resources, tuple(runtimes), verifier)


def _id_map_feed(app: App, settings: Settings) -> Any:
    """The worker's ID map of an app that declares ``id_mutation`` (None otherwise)."""
    if app.id_mutation is None:
        return None
    from framework.idmutation.map_feed import IdMapFeed

    return IdMapFeed(app, settings)


def _group_screen(app: App, holder: Any) -> Any:
    """The erased groups' test of the worker's screen for the contributions (None: none to screen)."""
    if holder is None:
        return None
    from framework.erasure.groups import group_screen

    return group_screen(app, holder)


def _screen_holder(app: App, worker: ConvergeFaustApp, resources: Resources, every: float = 5.0) -> Any:
    """The erasure screen of an app that declares personal data (None otherwise): loaded when the
    worker starts and reloaded every ``every`` seconds (a write of a subject erased meanwhile is
    still shadowed by the erasure's tombstones)."""
    if not app.personal_data:
        return None
    from framework.erasure.keyed import erasure_key
    from framework.erasure.screen import ScreenHolder

    holder = ScreenHolder(app, erasure_key(required=False))

    @worker.timer(every, name="converge.erasure.screen")
    async def reload() -> None:
        try:
            store = resources.store
        except RuntimeError:  # not open yet, or closed
            return
        await holder.refresh(store)

    return holder
