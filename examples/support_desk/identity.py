"""How support-desk events find their ticket's row, even when they carry only part of its key.

A ticket's row key is ``ticket_id = natural_key("ticket", tenant, source,
external_id)``: the external id alone is unique only inside one helpdesk
(``source``) of one customer (``tenant``). Not every producer knows all three:

- the helpdesk's ticket and comment events carry ``tenant``, ``source`` and
  ``external_id`` in their payload;
- its status webhook carries only ``external_id`` (each webhook URL belongs
  to one tenant's helpdesk, and the gateway adds the rest to the key);
- the enrichment services (SLA policy, sentiment scorer) and the privacy
  service carry no identity at all: they react to a ticket event and copy its
  Kafka key.

So the Kafka key is the identity: every event about a ticket has the ordering
key ``<tenant>/<source>/<external_id>`` (tenant and source without ``/``;
the external id may contain one), and every agent keys its writes from it
with ``TicketRef.of(event)``. Whatever identity a payload does carry must
agree with the key, or the event is a bad message. Because all events of a
ticket share one key, they also share a Kafka partition on every topic, and
the framework announces and projects a ticket's changes in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework import BadMessage, Event, natural_key

__all__ = ["TICKET_NAMESPACE", "TicketKeyError", "TicketRef", "ticket_id"]

#: Namespace of the ticket rows' natural keys.
TICKET_NAMESPACE = "ticket"
_MAX = {"tenant": 128, "source": 64, "external_id": 256}


class TicketKeyError(BadMessage):
    """The ordering key is not a ticket reference, or the payload names another ticket."""


def ticket_id(tenant: str, source: str, external_id: str) -> str:
    """The row key of a ticket: uuid5 over tenant, helpdesk and the helpdesk's ticket id."""
    return natural_key(TICKET_NAMESPACE, tenant, source, external_id)


@dataclass(frozen=True, slots=True)
class TicketRef:
    """The identity of one ticket in one tenant's helpdesk."""

    tenant: str
    source: str
    external_id: str

    @property
    def ticket_id(self) -> str:
        return ticket_id(self.tenant, self.source, self.external_id)

    @property
    def ordering_key(self) -> str:
        """The Kafka key of every event about this ticket."""
        return f"{self.tenant}/{self.source}/{self.external_id}"

    @property
    def key(self) -> dict[str, str]:
        """The partition key of the ticket's rows in every table."""
        return {"ticket_id": self.ticket_id}

    @property
    def cells(self) -> dict[str, str]:
        """The identity cells every writer of the ticket row writes."""
        return {"tenant": self.tenant, "source": self.source, "external_id": self.external_id}

    @classmethod
    def parse(cls, ordering_key: str) -> TicketRef:
        """The ticket ``ordering_key`` names; TicketKeyError unless it is ``tenant/source/external_id``."""
        parts = ordering_key.split("/", 2)
        if len(parts) != 3 or not all(parts):
            raise TicketKeyError(f"ordering_key: {ordering_key!r} is not '<tenant>/<source>/<external_id>'")
        ref = cls(*parts)
        for name, limit in _MAX.items():
            if len(getattr(ref, name)) > limit:
                raise TicketKeyError(f"ordering_key: {name} longer than {limit} characters")
        return ref

    @classmethod
    def of(cls, event: Event) -> TicketRef:
        """The ticket ``event`` is about: its ordering key, checked against the identity its payload
        carries (any of ``tenant``, ``source``, ``external_id``)."""
        ref = cls.parse(event.ordering_key)
        for name in ("tenant", "source", "external_id"):
            if name in event.payload and event.payload[name] != getattr(ref, name):
                raise TicketKeyError(
                    f"payload.{name}: {event.payload[name]!r} does not match the ordering key "
                    f"{event.ordering_key!r}"
                )
        return ref
