"""The delivery ledger's data model: configuration, table schemas, rows as read.

Two tables in the wide-column store:

- the ledger, partitioned by (time bucket of the capture time, shard), clustered
  by (source, capture time, message id). A message's first registration is its
  *origin row*: it holds the consumers' acknowledgement cells and the message's
  retry progress. Each retry adds a *retry row* with the same clustering key in
  the bucket current at retry time, so the verifier meets it again later.
- the index, partitioned by message id, pointing at the origin row, so an
  acknowledgement needs only the message id and the consumer name.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field

from framework.core.errors import ConvergeError
from framework.core.mutations import CellValue
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema

__all__ = [
    "Ack",
    "DeliveryError",
    "LedgerConfig",
    "Location",
    "MessageRef",
    "LedgerEntry",
    "ack_column",
    "check_consumer",
    "check_int",
    "check_message_id",
    "check_source",
]

_CONSUMER = re.compile(r"[a-z][a-z0-9_]{0,39}")
_TABLE = re.compile(r"[a-z][a-z0-9_]{0,41}")
MAX_ID_CHARS = 512
MINUTE_US = 60_000_000


class DeliveryError(ConvergeError, ValueError):
    """Malformed delivery input (consumer, message id, configuration); ``field`` names the part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def check_consumer(name: object) -> str:
    """Return ``name`` if it is a valid consumer name (lowercase identifier, <= 40 chars)."""
    if not isinstance(name, str) or not _CONSUMER.fullmatch(name):
        raise DeliveryError("consumer", f"{name!r} is not a consumer name ([a-z][a-z0-9_]{{0,39}})")
    return name


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise DeliveryError(what, f"must be a non-empty string of at most {MAX_ID_CHARS} characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise DeliveryError(what, "not valid Unicode (lone surrogate)") from None
    return value


def check_message_id(value: object) -> str:
    """Return ``value`` if it is a valid message id (1..512 characters, valid Unicode)."""
    return _check_text(value, "message_id")


def check_source(value: object) -> str:
    """Return ``value`` if it is a valid data source name."""
    return _check_text(value, "source")


def ack_column(consumer: str) -> str:
    """The ledger column holding ``consumer``'s acknowledgement."""
    return f"ack_{check_consumer(consumer)}"


def check_int(value: object, lo: int, hi: int, what: str) -> int:
    """Return ``value`` if it is an int (not bool) in ``[lo, hi]``, else raise DeliveryError."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DeliveryError(what, f"must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DeliveryError(what, f"must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class LedgerConfig:
    """A ledger: its table, declared consumers, bucket width, shard count and TTL.

    ``bucket_seconds`` (default 10 minutes) and ``shards`` fix the partitioning:
    every writer and reader of one ledger must use the same values.
    """

    consumers: tuple[str, ...]
    table: str = "delivery_ledger"
    bucket_seconds: int = 600
    shards: int = 1
    ttl_seconds: int = 7 * 24 * 3600

    def __post_init__(self) -> None:
        consumers = tuple(self.consumers)
        if not consumers:
            raise DeliveryError("consumers", "declare at least one consumer")
        for c in consumers:
            check_consumer(c)
        if len(set(consumers)) != len(consumers):
            raise DeliveryError("consumers", f"duplicate consumer names in {consumers}")
        object.__setattr__(self, "consumers", consumers)
        if not isinstance(self.table, str) or not _TABLE.fullmatch(self.table):
            raise DeliveryError("table", f"{self.table!r} is not a table name ([a-z][a-z0-9_]{{0,41}})")
        _positive(self.bucket_seconds, "bucket_seconds")
        _positive(self.shards, "shards")
        _positive(self.ttl_seconds, "ttl_seconds")

    @property
    def bucket_us(self) -> int:
        return self.bucket_seconds * 1_000_000

    @property
    def index_table(self) -> str:
        return f"{self.table}_idx"

    def bucket_of(self, at_us: int) -> int:
        """Start (microseconds) of the bucket holding ``at_us``."""
        return at_us - at_us % self.bucket_us

    def shard_of(self, message_id: str) -> int:
        """The shard of ``message_id`` (CRC-32, stable across processes)."""
        return zlib.crc32(message_id.encode("utf-8")) % self.shards

    def ledger_schema(self) -> TableSchema:
        return TableSchema(
            name=self.table,
            partition_key=(Column("bucket", "bigint"), Column("shard", "int")),
            clustering_key=(
                Column("source", "text"),
                Column("captured_at", "bigint"),
                Column("message_id", "text"),
            ),
            columns=(
                Column("priority", "int"),
                Column("retry", "int"),
                Column("origin_bucket", "bigint"),
                Column("expect", "text"),
                Column("src_topic", "text"),
                Column("src_partition", "int"),
                Column("src_offset", "bigint"),
                Column("retries", "int"),
                Column("retried_in", "bigint"),
                Column("gave_up", "text"),
                *(Column(ack_column(c), "boolean") for c in self.consumers),
            ),
        )

    def index_schema(self) -> TableSchema:
        return TableSchema(
            name=self.index_table,
            partition_key=(Column("message_id", "text"),),
            columns=(
                Column("bucket", "bigint"),
                Column("shard", "int"),
                Column("source", "text"),
                Column("captured_at", "bigint"),
            ),
        )


@dataclass(frozen=True, slots=True)
class Ack:
    """``consumer`` has durably processed the message ``message_id``."""

    message_id: str
    consumer: str

    def __post_init__(self) -> None:
        check_message_id(self.message_id)
        check_consumer(self.consumer)


@dataclass(frozen=True, slots=True)
class Location:
    """Where the original event sits in Kafka."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class MessageRef:
    """The primary key of a ledger row."""

    bucket: int
    shard: int
    source: str
    captured_at: int
    message_id: str

    def key(self) -> dict[str, str | int]:
        return {
            "bucket": self.bucket,
            "shard": self.shard,
            "source": self.source,
            "captured_at": self.captured_at,
            "message_id": self.message_id,
        }

    @property
    def clustering(self) -> tuple[str, int, str]:
        return (self.source, self.captured_at, self.message_id)


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger row as read (origin row when ``retry == 0``)."""

    ref: MessageRef
    priority: int
    retry: int
    origin_bucket: int
    expect: tuple[str, ...]
    location: Location | None = None
    retries: int = 0
    retried_in: int | None = None
    gave_up: str | None = None
    acked: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_origin(self) -> bool:
        return self.retry == 0

    @property
    def missing(self) -> tuple[str, ...]:
        """Expected consumers that have not acknowledged (meaningful on the origin row)."""
        return tuple(c for c in self.expect if c not in self.acked)

    @property
    def delivered(self) -> bool:
        return not self.missing

    def origin_ref(self, config: LedgerConfig) -> MessageRef:
        r = self.ref
        return MessageRef(
            self.origin_bucket, config.shard_of(r.message_id), r.source, r.captured_at, r.message_id
        )

    @classmethod
    def from_row(cls, row: Row, consumers: tuple[str, ...]) -> LedgerEntry | None:
        """Decode a row; None for a row whose registration cells have expired."""
        k, v = row.key, row.values()
        if v.get("retry") is None or v.get("origin_bucket") is None:
            return None
        ref = MessageRef(
            _int(k["bucket"]),
            _int(k["shard"]),
            str(k["source"]),
            _int(k["captured_at"]),
            str(k["message_id"]),
        )
        loc = None
        if all(v.get(c) is not None for c in ("src_topic", "src_partition", "src_offset")):
            loc = Location(str(v["src_topic"]), _int(v["src_partition"]), _int(v["src_offset"]))
        return cls(
            ref=ref,
            priority=_int(v.get("priority", 0)),
            retry=_int(v["retry"]),
            origin_bucket=_int(v["origin_bucket"]),
            expect=tuple(str(v.get("expect") or ",".join(consumers)).split(",")),
            location=loc,
            retries=_int(v.get("retries", 0)),
            retried_in=None if v.get("retried_in") is None else _int(v["retried_in"]),
            gave_up=None if v.get("gave_up") is None else str(v["gave_up"]),
            acked=frozenset(c for c in consumers if v.get(ack_column(c)) is True),
        )


def _int(value: CellValue) -> int:
    """An integer cell or key value (never None here: absent cells are handled by the caller)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeliveryError("row", f"expected an integer, got {value!r}")
    return value
