"""The default decoder: converge's own JSON envelope (``framework.core.events.parse_event``).

Version rule: the envelope's ``version`` field, as the producer wrote it (the source's
modification time in integer microseconds). The record's Kafka key must be the event's
``ordering_key`` (``checks_key``: the runtime parks a mismatch at stage ``key``).
"""

from __future__ import annotations

from typing import ClassVar

from framework.core.events import Event, EventError, parse_event
from framework.decoders.base import Record

__all__ = ["EnvelopeDecoder", "ENVELOPE"]


class EnvelopeDecoder:
    """converge's JSON envelope: ``event_id``, ``ordering_key``, ``version``, ``occurred_at``,
    ``type``, ``payload``."""

    name: ClassVar[str] = "envelope"
    checks_key: ClassVar[bool] = True

    def decode(self, record: Record) -> Event:
        if record.value is None:
            raise EventError("event", "empty message")
        return parse_event(record.value)

    def __repr__(self) -> str:
        return "EnvelopeDecoder()"


#: The one envelope decoder (stateless).
ENVELOPE = EnvelopeDecoder()
