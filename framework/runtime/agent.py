"""The KeyedAgent base class app teams subclass."""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from framework.core.events import Event
from framework.core.mutations import Mutation
from framework.core.schema import TableSchema
from framework.decoders.base import Decoder

if TYPE_CHECKING:
    from framework.core.lookup import Lookup

__all__ = ["KeyedAgent"]


class KeyedAgent(abc.ABC):
    """A pure mapping from events of one topic to mutations.

    Subclasses set ``name`` and ``topic``, declare the ``tables`` they write
    and the ``event_types`` they handle (the backfill routes archived events
    by type), and implement ``handle``. ``handle`` must do no I/O: the same
    function runs in the stream and in Spark backfills. ``delivery_consumer``
    names this agent in the delivery ledger.

    An agent that declares ``lookups`` implements ``handle(self, event, state)``
    instead: ``state`` is a read-only ``framework.state.StateView`` of those
    lookups (``state.get(name, key)`` returns the entry or raises ``Missing``,
    and the event waits for the entry); see docs/how-to/lookups-and-joins.md.
    """

    name: ClassVar[str]
    topic: ClassVar[str]
    tables: ClassVar[tuple[TableSchema, ...]] = ()
    event_types: ClassVar[tuple[str, ...]] = ()
    #: When set, the runtime acknowledges each event for this consumer in the
    #: delivery ledger once all of the event's writes are durable.
    delivery_consumer: ClassVar[str | None] = None
    #: The lookup tables ``handle(event, state)`` reads (``framework.state.Lookup``).
    lookups: ClassVar[tuple[Lookup, ...]] = ()
    #: How a record of ``topic`` becomes an event (``framework.decoders``): None is converge's
    #: JSON envelope; e.g. ``CdcDecoder("ticket")`` for a table's change events. A record that
    #: does not decode is parked at stage ``parse``. See docs/how-to/decoders.md.
    decoder: ClassVar[Decoder | None] = None

    @abc.abstractmethod
    def handle(self, event: Event) -> Iterable[Mutation]:
        """The mutations this event implies.

        Whatever it raises makes the event a bad message: the stream and the
        backfill both park it (stage ``map``) and go on. Raise
        ``framework.BadMessage`` (or a subclass) with a clear text.
        """

    def relation_key(self, event: Event) -> str:
        """Events with the same relation key are processed in order, and a failing one
        holds back the later ones (default: the ordering key). Override to relate
        events by another field, e.g. a user id."""
        return event.ordering_key
