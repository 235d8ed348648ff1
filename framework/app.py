"""``App``: an app's declarations (agents, projections, the features it turns on), checked when made.

It declares and never builds: ``framework.worker`` assembles a worker from it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from framework.aggregates.tables import tables_of
from framework.core.aggregate import Aggregate
from framework.core.events import Event, EventError
from framework.core.lookup import Lookup
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
from framework.state.join import JoinConfig

__all__ = ["App"]


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
    (``framework.notifications``). ``framework.worker.wiring.build_worker``
    builds its Faust app; the store, the index and the dead-letter WAL open
    when the worker starts and close when it stops.
    """

    def __init__(
        self,
        name: str,
        *,
        agents: Sequence[KeyedAgent],
        projections: Sequence[Projection] = (),
        aggregates: Sequence[Aggregate] = (),
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
        an event of that topic); a lookup on such a topic not declared here is refused.
        ``aggregates``: totals across entities (``framework.core.aggregate``), maintained like
        projections from the change feed, their contributions and totals in the store."""
        if not name or not isinstance(name, str):
            raise ValueError("App: name must be a non-empty string")
        self.name = name
        self.agents: tuple[KeyedAgent, ...] = tuple(agents)
        self.projections: tuple[Projection, ...] = tuple(projections)
        self.aggregates: tuple[Aggregate, ...] = tuple(aggregates)
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
        _unique((p.name for p in self.views), "projection or aggregate name")
        _unique((p.alias for p in self.projections), "projection alias")
        for a in self.aggregates:
            if not isinstance(a, Aggregate):
                raise ValueError(f"App {self.name}: {a!r} in aggregates is not an Aggregate")
        _unique((a.topic for a in self.agents), "agent topic")
        owner: dict[str, str] = {}
        for agent in self.agents:
            for t in agent.event_types:
                if t in owner:
                    raise ValueError(f"App {self.name}: event type {t!r} in {owner[t]} and {agent.name}")
                owner[t] = agent.name
        by_name = {p.name: p for p in self.views}
        for p in self.views:
            p.partition_key  # noqa: B018 - raises SchemaError when the source tables disagree
            if p.marks_from is not None:
                _check_marks_from(self.name, p, by_name.get(p.marks_from))
        check_declarations(self.personal_data, self.tables, self.aggregates)
        if self.id_mutation is not None:
            check_id_mutation(self.id_mutation, self.tables)
        self._check_lookup_topics(owner)
        self._check_decoders()

    def _check_decoders(self) -> None:
        """Lookups read converge's envelope only: no lookup on a decoded topic, no decoded agent
        with lookups (its recorded events are mapped again from their envelope)."""
        decoded = {a.topic: a for a in self.agents if a.decoder is not None}
        for agent in decoded.values():
            if agent.lookups:
                raise ValueError(
                    f"App {self.name}: agent {agent.name} has a decoder and lookups (not supported)"
                )
        for lk in self.lookups:
            if lk.topic in decoded:
                owner = decoded[lk.topic]
                raise ValueError(
                    f"App {self.name}: lookup {lk.name!r} reads {lk.topic!r}, which agent "
                    f"{owner.name} decodes ({owner.decoder!r}): lookups read envelopes"
                )

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
        declared += [t for p in self.views for t in (*p.tables, p.version_table)]
        declared += [t for a in self.aggregates for t in tables_of(a).all]
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

    @property
    def views(self) -> tuple[Projection, ...]:
        """The projections, then the aggregates: everything the change feed maintains."""
        return (*self.projections, *self.aggregates)

    def aggregate(self, name: str) -> Aggregate:
        """The aggregate called ``name``; KeyError naming the known ones."""
        for a in self.aggregates:
            if a.name == name:
                return a
        known = [a.name for a in self.aggregates]
        raise KeyError(f"App {self.name} has no aggregate {name!r} (aggregates: {known})")

    def views_of(self, agent: KeyedAgent) -> tuple[Projection, ...]:
        """The projections and aggregates reading a table ``agent`` declares it writes."""
        written = {t.name for t in agent.tables}
        return tuple(p for p in self.views if p.source_names & written)

    def change_feeds(self, agent: KeyedAgent) -> dict[str, Projection]:
        """The change topics announcing what ``agent`` writes, with their views: a view that
        shares another's marks (``marks_from``) has its changes announced on that view's topic
        and is projected with it (``sharing_marks``)."""
        return {self.change_topic(p): p for p in self.views_of(agent) if p.marks_from is None}

    def sharing_marks(self, view: Projection) -> tuple[Projection, ...]:
        """The views sharing ``view``'s version marks (their ``marks_from`` names it)."""
        return tuple(p for p in self.views if p.marks_from == view.name)

    def change_topic(self, projection: Projection) -> str:
        """The change topic of a projection or aggregate: ``<app>.<name>.changes``."""
        return f"{self.name}.{projection.name}.changes"

    def group_topic(self, aggregate: Aggregate) -> str:
        """The topic announcing an aggregate's changed groups: ``<app>.<aggregate>.groups``."""
        return f"{self.name}.{aggregate.name}.groups"

    def topics(self) -> dict[str, str]:
        """Every topic the worker consumes, mapped to what consumes it: agent topics (the agent),
        topics only lookups read (``lookup.<name>[,<name>]``), change topics (``project.<name>``),
        aggregates' group topics (``totals.<name>``)."""
        out = {a.topic: a.name for a in self.agents}
        for topic in self.lookup_topics:
            out[topic] = "lookup." + ",".join(lk.name for lk in self.lookups if lk.topic == topic)
        out.update({self.change_topic(p): f"project.{p.name}" for p in self.views})
        out.update({self.group_topic(a): f"totals.{a.name}" for a in self.aggregates})
        return out


def _check_marks_from(app: str, view: Projection, shared: Projection | None) -> None:
    """SchemaError unless ``shared`` (the view ``view.marks_from`` names) keeps its own marks
    for the same source tables and partition key."""
    where = f"App {app}: {view.name}.marks_from = {view.marks_from!r}"
    if shared is None or shared is view:
        raise SchemaError("marks_from", f"{where} names no other projection or aggregate of the app")
    if shared.marks_from is not None:
        raise SchemaError("marks_from", f"{where} shares marks itself (marks_from = {shared.marks_from!r})")
    if shared.source_names != view.source_names or shared.partition_key != view.partition_key:
        raise SchemaError(
            "marks_from",
            f"{where} reads {sorted(shared.source_names)}, not {sorted(view.source_names)} by the same key",
        )


def _unique(names: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"duplicate {what} {n!r}")
        seen.add(n)
