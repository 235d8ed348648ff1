"""Decoders: a Kafka record in, an ``Event`` out, so an agent can consume a topic teams already have.

``KeyedAgent.decoder`` names an agent's decoder (default: converge's JSON envelope). The worker,
the test kit (``Driver.send`` of ``Record``s), the Spark backfill (archives of records) and
``spark ingest`` all decode a record with the same decoder. One module per decoder:

- ``envelope``: converge's envelope (the default);
- ``cdc``: Debezium-shaped change events of a table (insert, update, delete, snapshot, tombstone);
- ``registry``: the schema-registry wire format (magic byte 0, 4-byte schema id, payload) and a
  caching registry client; ``avro``, ``json_schema``, ``protobuf`` decode its payloads
  (the ``decoders`` extra); ``registry_server``: a stand-in registry for tests and the local stack;
- ``cloudevents``: CloudEvents in structured and binary mode;
- ``fields``: how a decoded record's fields become an event (shared by the registry formats).

The registry formats' modules import their package (the ``decoders`` extra) and are not imported
here: ``from framework.decoders.avro import AvroDecoder``.

See docs/how-to/decoders.md.
"""

from framework.decoders.base import DecodeError, Decoder, Record, record_from_json, record_to_json
from framework.decoders.cdc import CdcDecoder
from framework.decoders.envelope import ENVELOPE, EnvelopeDecoder
from framework.decoders.fields import EventFields
from framework.decoders.registry import RegistryUnavailable, SchemaRegistry, UnknownSchema

__all__ = [
    "Decoder",
    "DecodeError",
    "Record",
    "record_from_json",
    "record_to_json",
    "EnvelopeDecoder",
    "ENVELOPE",
    "CdcDecoder",
    "EventFields",
    "SchemaRegistry",
    "UnknownSchema",
    "RegistryUnavailable",
]
