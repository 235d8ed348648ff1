"""End-to-end delivery verification: a ledger of messages and consumer acks, and a verifier that retries.

- ``DeliveryLedger`` (``ledger``) registers messages and records acknowledgements;
- ``TrackedProducer`` registers, publishes and locates a message;
- ``DeliveryAckSink`` / ``delivery_sinks`` ack from a KeyedAgent, ``register_ack_agent``
  from an acks topic, ``AckServer`` / ``mount_on_faust`` over HTTP;
- ``Verifier`` retries unacknowledged messages and checkpoints complete buckets;
  ``register_verifier_timer`` runs it inside a worker;
- ``failed_messages`` and ``build_report`` answer what was (not) delivered.
"""

from framework.delivery.ack_agent import register_ack_agent
from framework.delivery.ack_http import AckServer, mount_on_faust
from framework.delivery.acks import DeliveryAckSink, delivery_sinks
from framework.delivery.ledger import DeliveryLedger
from framework.delivery.model import Ack, DeliveryError, LedgerConfig, LedgerEntry, Location, MessageRef
from framework.delivery.producer import TrackedProducer
from framework.delivery.queries import failed_messages
from framework.delivery.report import build_report
from framework.delivery.timer import register_verifier_timer
from framework.delivery.verifier import Refetched, Verifier, VerifierConfig

__all__ = [
    "Ack",
    "AckServer",
    "DeliveryAckSink",
    "DeliveryError",
    "DeliveryLedger",
    "LedgerConfig",
    "LedgerEntry",
    "Location",
    "MessageRef",
    "Refetched",
    "TrackedProducer",
    "Verifier",
    "VerifierConfig",
    "build_report",
    "delivery_sinks",
    "failed_messages",
    "mount_on_faust",
    "register_ack_agent",
    "register_verifier_timer",
]
