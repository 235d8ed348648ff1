"""``App``: an app's declarations (agents, projections) and the worker the framework wires from them."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import faust

from framework.core.events import Event, EventError
from framework.core.projection import Projection
from framework.core.schema import SchemaError, TableSchema
from framework.erasure.declare import PersonalData, check_declarations
from framework.erasure.tables import ERASURE_TABLES
from framework.idmutation.declare import IdMutation, check_id_mutation
from framework.idmutation.routes import ROUTES_TABLE
from framework.notifications.config import NotificationConfig
from framework.retention.policy import RetentionPolicy
from framework.runtime.agent import KeyedAgent
from framework.runtime.binding import RuntimeConfig
from framework.settings import Settings
from framework.state.join import JoinConfig
from framework.state.lookup import Lookup

__all__ = ["App", "create_faust_app"]

log = logging.getLogger(__name__)


class App:
    """What an app team declares: a name, its agents and its projections.

    The framework derives the rest: the tables to ensure (every agent's
    ``tables``, every projection's source tables and version table), the
    topics to create (each agent's topic, every topic only lookups read, one
    change topic per projection),
    each agent's sinks (the store, then the change feed of every projection
    that reads a table it writes, then the delivery-ledger ack when the agent
    declares ``delivery_consumer`` and the app has a ``delivery`` config),
    and one projector per projection. With ``notifications`` on, the store
    sink also writes each micro-batch's notification entries
    (``framework.notifications``). ``worker(settings)`` builds the Faust
    app; the store, the index and the dead-letter WAL open when the worker
    starts and close when it stops.
    """

    def __init__(
        self,
        name: str,
        *,
        agents: Sequence[KeyedAgent],
        projections: Sequence[Projection] = (),
        runtime: RuntimeConfig | None = None,
        delivery: Any | None = None,
        notifications: NotificationConfig | bool = False,
        retention: RetentionPolicy | None = None,
        joins: JoinConfig | None = None,
        personal_data: Sequence[PersonalData] = (),
        id_mutation: IdMutation | None = None,
        lookup_topics: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``delivery``: a ``framework.delivery.LedgerConfig`` for agents that declare a
        ``delivery_consumer``. ``notifications``: record every micro-batch's changes in the
        notification table (True: the default ``NotificationConfig``). ``personal_data``: which
        cells hold which kind of data subject (``framework.erasure``, ``converge erase``). Raises
        SchemaError/ValueError for inconsistent declarations. ``retention``: a
        ``framework.retention.RetentionPolicy`` (``converge retention run``). ``joins``: bounds
        of the lookup joins (``framework.state.JoinConfig``). ``id_mutation``: where ID mutation
        requests arrive and which tables hold owner ids (``framework.idmutation.IdMutation``).
        ``lookup_topics``: every topic a lookup reads that no agent consumes, with the event types
        it carries (``App.topic_of``: how the test kit and a backfill, which see no topic, know
        an event of that topic); a lookup on such a topic not declared here is refused."""
        if not name or not isinstance(name, str):
            raise ValueError("App: name must be a non-empty string")
        self.name = name
        self.agents: tuple[KeyedAgent, ...] = tuple(agents)
        self.projections: tuple[Projection, ...] = tuple(projections)
        self.runtime = runtime or RuntimeConfig()
        self.delivery = delivery
        self.notifications: NotificationConfig | None = (
            NotificationConfig() if notifications is True else notifications or None
        )
        self.retention: RetentionPolicy | None = retention
        self.joins = joins or JoinConfig()
        self.personal_data: tuple[PersonalData, ...] = tuple(personal_data)
        self.id_mutation = id_mutation
        self.lookup_topics: dict[str, tuple[str, ...]] = {
            t: (types,) if isinstance(types, str) else tuple(types)
            for t, types in (lookup_topics or {}).items()
        }
        self._check()

    # -- declarations -------------------------------------------------------
    def _check(self) -> None:
        if not self.agents:
            raise ValueError(f"App {self.name}: declares no agent")
        _unique((a.name for a in self.agents), "agent name")
        _unique((p.name for p in self.projections), "projection name")
        _unique((p.alias for p in self.projections), "projection alias")
        _unique((a.topic for a in self.agents), "agent topic")
        owner: dict[str, str] = {}
        for agent in self.agents:
            for t in agent.event_types:
                if t in owner:
                    raise ValueError(f"App {self.name}: event type {t!r} in {owner[t]} and {agent.name}")
                owner[t] = agent.name
        for p in self.projections:
            p.partition_key  # noqa: B018 - raises SchemaError when the source tables disagree
        check_declarations(self.personal_data, self.tables)
        if self.id_mutation is not None:
            check_id_mutation(self.id_mutation, self.tables)
        self._check_lookup_topics(owner)

    def _check_lookup_topics(self, owner: dict[str, str]) -> None:
        """Every lookup topic is an agent's or declared in ``lookup_topics`` with its event types."""
        consumed = {a.topic for a in self.agents}
        read = {lk.topic for lk in self.lookups}  # raises ValueError for two lookups of one name
        for lk in self.lookups:
            if lk.topic not in consumed and lk.topic not in self.lookup_topics:
                raise ValueError(
                    f"App {self.name}: lookup {lk.name!r} reads topic {lk.topic!r}, which no agent consumes: "
                    f"declare the event types it carries, App(lookup_topics={{{lk.topic!r}: (...)}})"
                )
        for topic, types in self.lookup_topics.items():
            if topic in consumed or topic not in read:
                raise ValueError(
                    f"App {self.name}: lookup_topics names {topic!r}, which is "
                    + ("an agent's topic" if topic in consumed else "no lookup's topic")
                )
            if not types or not all(isinstance(t, str) and t for t in types):
                raise ValueError(f"App {self.name}: lookup topic {topic!r} needs its event types (non-empty)")
            for t in types:
                if t in owner:
                    raise ValueError(
                        f"App {self.name}: event type {t!r} in {owner[t]} and lookup topic {topic!r}"
                    )
                owner[t] = f"lookup topic {topic!r}"

    @property
    def lookups(self) -> tuple[Lookup, ...]:
        """Every lookup an agent reads, once each (one name, one definition)."""
        found: dict[str, Lookup] = {}
        for agent in self.agents:
            for lookup in agent.lookups:
                if found.setdefault(lookup.name, lookup) != lookup:
                    raise ValueError(f"App {self.name}: lookup {lookup.name!r} declared twice, differently")
        return tuple(found.values())

    @property
    def tables(self) -> tuple[TableSchema, ...]:
        """Every table the app writes or reads, once each."""
        found: dict[str, TableSchema] = {}
        declared = [t for a in self.agents for t in a.tables]
        declared += [t for p in self.projections for t in (*p.tables, p.version_table)]
        if self.personal_data:
            declared += ERASURE_TABLES
        if self.id_mutation is not None:
            declared.append(ROUTES_TABLE)  # where ID mutation records the cells it moved or dropped
        for schema in declared:
            seen = found.setdefault(schema.name, schema)
            if seen != schema:
                raise SchemaError("tables", f"App {self.name}: {schema.name} is declared twice, differently")
        return tuple(found.values())

    def agent(self, name: str) -> KeyedAgent:
        """The agent called ``name``; KeyError naming the known ones."""
        for a in self.agents:
            if a.name == name:
                return a
        raise KeyError(f"App {self.name} has no agent {name!r} (agents: {[a.name for a in self.agents]})")

    def projection(self, name: str) -> Projection:
        """The projection called ``name`` (or with that alias); KeyError naming the known ones."""
        for p in self.projections:
            if name in (p.name, p.alias):
                return p
        known = [p.name for p in self.projections]
        raise KeyError(f"App {self.name} has no projection {name!r} (projections: {known})")

    def route(self, event: Event, topic: str | None = None) -> KeyedAgent:
        """The agent that handles ``event``: the one consuming ``topic`` when given, else the one
        declaring its type in ``event_types``, else the only agent. EventError when none fits."""
        if topic is not None:
            for a in self.agents:
                if a.topic == topic:
                    return a
            raise EventError("topic", f"no agent of {self.name} consumes {topic!r}")
        for a in self.agents:
            if event.type in a.event_types:
                return a
        if len(self.agents) == 1 and not self.agents[0].event_types:
            return self.agents[0]
        raise EventError("type", f"no agent of {self.name} declares event type {event.type!r}")

    def topic_of(self, event: Event) -> str:
        """The topic ``event`` belongs on when none is known (the test kit, a backfill's archive):
        the agent's that declares its type, else the lookup topic that declares it, else the
        only agent's (``route``). EventError when none fits."""
        for a in self.agents:
            if event.type in a.event_types:
                return a.topic
        for topic, types in self.lookup_topics.items():
            if event.type in types:
                return topic
        return self.route(event).topic

    def consumed_by_agent(self, topic: str) -> bool:
        """True when an agent consumes ``topic`` (False for a topic only lookups read)."""
        return any(a.topic == topic for a in self.agents)

    def projections_of(self, agent: KeyedAgent) -> tuple[Projection, ...]:
        """The projections reading a table ``agent`` declares it writes."""
        written = {t.name for t in agent.tables}
        return tuple(p for p in self.projections if p.source_names & written)

    def change_topic(self, projection: Projection) -> str:
        """The change topic of ``projection``: ``<app>.<projection>.changes``."""
        return f"{self.name}.{projection.name}.changes"

    def topics(self) -> dict[str, str]:
        """Every topic the worker consumes, mapped to what consumes it: agent topics (the agent),
        topics only lookups read (``lookup.<name>[,<name>]``), change topics (``project.<name>``)."""
        out = {a.topic: a.name for a in self.agents}
        for topic in self.lookup_topics:
            out[topic] = "lookup." + ",".join(lk.name for lk in self.lookups if lk.topic == topic)
        out.update({self.change_topic(p): f"project.{p.name}" for p in self.projections})
        return out

    # -- the worker ---------------------------------------------------------
    def worker(self, settings: Settings | None = None) -> faust.App:
        """The Faust app that runs every agent and projector of this app (settings from the
        environment when not given); with a ``web_port`` it serves Prometheus metrics."""
        from framework.wiring import wire

        settings = settings or Settings.resolve(self.name)
        faust_app = create_faust_app(settings)
        faust_app.converge = wire(self, faust_app, settings)
        if settings.web_port is not None:  # its web server is on: serve GET /metrics there too
            from framework.metrics import mount_metrics

            mount_metrics(faust_app)
        return faust_app


def _unique(names: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"duplicate {what} {n!r}")
        seen.add(n)


class ConvergeFaustApp(faust.App):
    """A ``faust.App`` with hooks: ``starting`` runs before the consumer and agents start,
    ``stopped`` after they stopped. ``converge`` is the app's wiring (``framework.wiring.Wiring``:
    resources, runtimes, ``status()``) when built by ``App.worker``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starting: list[Any] = []
        self.stopped: list[Any] = []
        self.converge: Any = None

    async def on_start(self) -> None:
        await super().on_start()
        for hook in self.starting:
            await hook()

    async def on_shutdown(self) -> None:
        for hook in reversed(self.stopped):
            try:
                await hook()
            except Exception:  # noqa: BLE001 - shutting down: log and go on closing the rest
                log.exception("error while closing %r", hook)
        await super().on_shutdown()


def create_faust_app(settings: Settings, **overrides: object) -> ConvergeFaustApp:
    """A ``faust.App`` configured for manual, ordered acknowledgement.

    - commits every second from acks the runtime gives in offset order;
    - ``stream_wait_empty`` off: shutdown and revocation never wait on a
      blocked key; unacknowledged work is redelivered from the last commit;
    - producer batches expire after 30 s, not Faust's 20 minutes: every revocation and
      the shutdown flush the producer, and a batch the broker never takes would stall
      them, and with them the whole consumer group, that long; an expired send fails its
      sink call, which is retried;
    - tables in RocksDB (rocksdict) under the worker's own data dir;
    - the web server off unless ``web_port`` is set (then bound to 127.0.0.1).
    """
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    conf: dict[str, object] = {
        "broker": settings.broker,
        "datadir": str(data_dir / "faust"),
        "store": "rocksdb://",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": 1,
        "broker_commit_interval": 1.0,
        "broker_commit_every": 10_000,
        "stream_wait_empty": False,
        "broker_session_timeout": 30.0,
        "broker_heartbeat_interval": 3.0,
        "broker_rebalance_timeout": 60.0,
        "broker_max_poll_interval": 300.0,
        "consumer_auto_offset_reset": "earliest",
        "producer_acks": -1,
        "producer_request_timeout": 30.0,
        "web_enabled": settings.web_port is not None,
        "web_host": "127.0.0.1",
        "web_port": settings.web_port or 6066,
        "web_bind": "127.0.0.1",
    }
    conf.update(overrides)
    return ConvergeFaustApp(settings.app_id, **conf)
