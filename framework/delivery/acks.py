"""Acknowledgements: the strict wire format and the sink a KeyedAgent acks through.

Wire format (acks topic records and HTTP bodies), JSON:

- one ack: ``{"message_id": "...", "consumer": "..."}``
- a batch (HTTP): ``{"acks": [<ack>, ...]}`` with 1..``MAX_BATCH`` acks

Unknown fields are refused, so a typo never becomes a silent no-op. Bodies
that are not UTF-8 JSON, nest too deeply for the parser or hold an integer past
Python's digit limit are an ``AckFormatError`` like any other malformed input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from framework.core.errors import BadMessage
from framework.core.events import Event
from framework.core.mutations import Mutation
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack, DeliveryError, check_consumer

__all__ = [
    "AckFormatError",
    "parse_ack",
    "parse_ack_batch",
    "encode_ack",
    "DeliveryAckSink",
    "delivery_sinks",
    "MAX_BATCH",
]

#: Most acks one HTTP request may carry.
MAX_BATCH = 1000
#: Largest encoded ack batch accepted, in bytes.
MAX_BODY_BYTES = 1 << 20


class AckFormatError(DeliveryError, BadMessage):
    """An ack record or body is malformed; ``field`` names the offending part."""


def _decode(raw: bytes | str) -> Any:
    if isinstance(raw, bytes | bytearray):
        if len(raw) > MAX_BODY_BYTES:
            raise AckFormatError("body", f"larger than {MAX_BODY_BYTES} bytes")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise AckFormatError("body", "not UTF-8") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AckFormatError("body", f"not JSON: {exc.msg} at {exc.pos}") from None
    except RecursionError:
        raise AckFormatError("body", "JSON nested too deeply") from None
    except ValueError:  # the one other ValueError json.loads raises: an integer past the digit limit
        limit = sys.get_int_max_str_digits()
        raise AckFormatError("body", f"JSON integer longer than {limit} digits") from None


def _ack_from(obj: object, where: str) -> Ack:
    if not isinstance(obj, Mapping):
        raise AckFormatError(where, f"must be an object, got {type(obj).__name__}")
    extra = set(obj) - {"message_id", "consumer"}
    if extra:
        raise AckFormatError(where, f"unknown fields {sorted(extra)}")
    for name in ("message_id", "consumer"):
        if name not in obj:
            raise AckFormatError(f"{where}.{name}", "missing")
    try:
        return Ack(obj["message_id"], obj["consumer"])
    except DeliveryError as exc:
        raise AckFormatError(f"{where}.{exc.field}", str(exc).split(": ", 1)[-1]) from None


def parse_ack(raw: bytes | str | Mapping[str, Any]) -> Ack:
    """One ack from a record value; AckFormatError when malformed."""
    return _ack_from(raw if isinstance(raw, Mapping) else _decode(raw), "ack")


def parse_ack_batch(raw: bytes | str) -> list[Ack]:
    """Every ack of a batch body, all validated; AckFormatError on the first bad part."""
    body = _decode(raw)
    if not isinstance(body, Mapping):
        raise AckFormatError("body", f"must be an object, got {type(body).__name__}")
    if set(body) != {"acks"}:
        raise AckFormatError("body", f"must have exactly the field 'acks', got {sorted(body)}")
    items = body["acks"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise AckFormatError("acks", f"must be a list of 1..{MAX_BATCH} acks")
    return [_ack_from(item, f"acks[{i}]") for i, item in enumerate(items)]


def encode_ack(ack: Ack) -> bytes:
    """The record value of ``ack`` on the acks topic."""
    return json.dumps({"message_id": ack.message_id, "consumer": ack.consumer}, sort_keys=True).encode()


class DeliveryAckSink:
    """Acknowledges each event for ``consumer`` once the sinks before it have written it.

    Append it after an agent's store sinks: the runtime calls sinks in order
    and awaits each, so the ack is written only when the event's writes are
    durable. ``message_id_of`` maps an event to its ledger message id
    (default: ``event.event_id``). Events the ledger does not trace are
    counted in ``untraced`` and otherwise ignored; store errors propagate, so
    the runtime retries the event.
    """

    name = "delivery_ack"

    def __init__(
        self,
        ledger: DeliveryLedger,
        consumer: str,
        *,
        message_id_of: Callable[[Event], str] = lambda e: e.event_id,
    ) -> None:
        check_consumer(consumer)
        if consumer not in ledger.consumers:
            raise DeliveryError("consumer", f"{consumer!r} is not declared in the ledger {ledger.consumers}")
        self.ledger = ledger
        self.consumer = consumer
        self._message_id_of = message_id_of
        self.acked = 0
        self.untraced = 0

    async def write(self, event: Event, mutations: Sequence[Mutation]) -> None:
        await self.write_batch([(event, mutations)])

    async def write_batch(self, batch: Sequence[tuple[Event, Sequence[Mutation]]]) -> None:
        """One ``ack_many`` for every event of the batch."""
        result = await self.ledger.ack_many([Ack(self._message_id_of(e), self.consumer) for e, _ in batch])
        self.acked += len(result.acked)
        self.untraced += len(result.unknown)


def delivery_sinks(agent: object, ledger: DeliveryLedger) -> list[DeliveryAckSink]:
    """``[DeliveryAckSink]`` when ``agent`` declares ``delivery_consumer``, else ``[]``.

    Append the result to the agent's sinks, after its store sinks.
    """
    consumer = getattr(agent, "delivery_consumer", None)
    return [] if consumer is None else [DeliveryAckSink(ledger, consumer)]
