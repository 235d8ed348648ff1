"""Change events of a database table in Debezium's shape: ``before``, ``after``, ``op``, ``source``.

One decoder per table (``CdcDecoder("ticket")``). Each record becomes an event of type
``<entity>.insert`` (op ``c``), ``<entity>.update`` (``u``), ``<entity>.delete`` (``d``),
``<entity>.snapshot`` (``r``, a row read by a snapshot) or ``<entity>.tombstone`` (a null value:
the compaction marker Debezium sends after a delete). The payload is
``{"op", "key", "before", "after", "committed_at", "position"}``; the app's mapping turns an
insert, update or snapshot into an ``Upsert`` of ``after`` and a delete into a ``Delete`` of
``key``, and maps a tombstone to nothing (its delete came before it, with a position).

The record's key is the row's primary key (JSON, optionally in Debezium's ``schema``/``payload``
wrapper); the ordering key is its values joined by ``/`` in key order (or ``ordering_key(key)``),
so every change of a row shares one ordering key, as it shares one Kafka partition.

**Version rule** (integer microseconds, like every converge version): a change's version is its
commit millisecond (``source.ts_ms``) times 1000 plus its order inside its transaction
(``transaction.total_order``, Debezium's ``provide.transaction.metadata``; 0 without it), at most
999. So a change committed in a later millisecond always has a higher version, and two changes of
one row in one transaction are ordered by their order in it. A snapshot row (op ``r``) is the
state at the snapshot's log position, but its ``ts_ms`` is when it was *read*, after live changes
that committed while the snapshot ran: its version is its read time minus ``snapshot_window``
(default one day), so it ranks below every live change committed up to that long before it was
read (the changes it may predate) and above older ones; a later snapshot ranks above an earlier
one. Ranking a snapshot row below live changes that it already contains is harmless: the topic
holds them (retention deletes the oldest records first, compaction keeps each row's latest), and
the latest of them has the snapshot's image.

Limits: two transactions that commit in the same millisecond and change the same row are ordered
by their order inside their transactions, not by commit (MySQL's binlog has second precision:
``ts_ms`` is a whole second there, so the limit is per second); two changes of one row in one
transaction without transaction metadata tie (the larger value wins, as on any tie); more than
999 changes in one transaction share the last slot; a snapshot that runs longer than
``snapshot_window`` can overwrite a live change made more than that long before its read.

A record must carry its log position (``source.lsn``, ``source.file`` + ``source.pos``,
``source.change_lsn``/``commit_lsn`` or ``source.scn``) and commit time: the position is part of
the ``event_id`` (stable across replays: the same change at the same position), and a record
without one, of another shape, or of an unsupported op (``t`` truncate, ``m`` message) is a
``DecodeError``, parked at stage ``parse``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from framework.core.events import Event
from framework.core.mutations import MAX_VERSION
from framework.decoders.base import DecodeError, Record

__all__ = ["CdcDecoder", "OPS", "cdc_version"]

#: Debezium's op codes and the event kind each becomes.
OPS = {"c": "insert", "u": "update", "d": "delete", "r": "snapshot"}
#: A day in microseconds: the default bound on how long a snapshot runs.
DAY_US = 86_400_000_000
_POSITION_FIELDS = ("lsn", "change_lsn", "commit_lsn", "scn", "file", "pos", "row", "event_serial_no", "ord")


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _json(data: bytes, part: str) -> Any:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(part, f"not JSON: {exc}") from None
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        value = value["payload"]  # the JSON converter's schemas.enable=true wrapper
    return value


def _int(d: Mapping[str, Any], name: str, where: str) -> int | None:
    v = d.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise DecodeError(f"{where}.{name}", f"must be a non-negative integer, got {v!r}")
    return v


def position_of(source: Mapping[str, Any]) -> str:
    """The log position of a change as text (``lsn=...``, ``file=...;pos=...``); DecodeError
    when ``source`` carries none."""
    has = [f for f in _POSITION_FIELDS if source.get(f) is not None]
    if not any(f in has for f in ("lsn", "change_lsn", "commit_lsn", "scn")) and not (
        "file" in has and "pos" in has
    ):
        raise DecodeError("source", "no log position (lsn, file and pos, change_lsn, commit_lsn or scn)")
    return ";".join(f"{f}={source[f]}" for f in has)


def cdc_version(op: str, ts_ms: int, order: int, snapshot_window: int) -> int:
    """The version of a change (see the module doc): ``ts_ms * 1000 + min(order, 999)``; a
    snapshot row's ``ts_ms * 1000 - snapshot_window`` (at least 0)."""
    if op == "r":
        return max(0, ts_ms * 1000 - snapshot_window)
    return ts_ms * 1000 + min(max(order, 0), 999)


class CdcDecoder:
    """Debezium-shaped change events of one table (see the module doc)."""

    name: ClassVar[str] = "cdc"
    checks_key: ClassVar[bool] = False

    def __init__(
        self,
        entity: str,
        *,
        key_columns: Sequence[str] | None = None,
        ordering_key: Callable[[Mapping[str, Any]], str] | None = None,
        snapshot_window: int = DAY_US,
        read_value: Callable[[Record], Any] | None = None,
        read_key: Callable[[Record], Any] | None = None,
    ) -> None:
        """``entity`` prefixes the event types. ``key_columns``: the primary key's columns in
        order (default: the record key's, as they come). ``ordering_key``: the ordering key of a
        key (default: its values joined by ``/``). ``snapshot_window``: microseconds a snapshot
        may run (the version rule). ``read_value``: the change event of a record as a mapping
        (default: its value as JSON; e.g. ``AvroDecoder(registry).read`` for Debezium's Avro
        converter); ``read_key``: the row's key of a record (default: its key as JSON; e.g.
        ``AvroDecoder(registry).read_key``)."""
        if not entity or "." in entity:
            raise ValueError(f"CdcDecoder: entity must be a non-empty name without '.', not {entity!r}")
        if snapshot_window < 0:
            raise ValueError("CdcDecoder: snapshot_window must not be negative")
        self.entity = entity
        self.key_columns = tuple(key_columns) if key_columns else None
        self._ordering_key = ordering_key
        self.snapshot_window = snapshot_window
        self._read_value = read_value
        self._read_key = read_key

    @property
    def event_types(self) -> tuple[str, ...]:
        """The types of the events it gives (for ``KeyedAgent.event_types``)."""
        return tuple(f"{self.entity}.{kind}" for kind in (*OPS.values(), "tombstone"))

    def _key(self, record: Record) -> dict[str, Any]:
        if record.key is None:
            raise DecodeError("key", "a change event needs its row's key as the record key")
        key = self._read_key(record) if self._read_key else _json(record.key, "key")
        if not isinstance(key, dict) or not key:
            raise DecodeError("key", f"must be a non-empty JSON object, got {type(key).__name__}")
        if self.key_columns is not None:
            missing = [c for c in self.key_columns if c not in key]
            if missing:
                raise DecodeError("key", f"lacks key columns {missing}")
            key = {c: key[c] for c in self.key_columns}
        for c, v in key.items():
            if v is None or isinstance(v, dict | list):
                raise DecodeError("key", f"column {c!r} must be a scalar, got {v!r}")
        return key

    def _ordering(self, key: Mapping[str, Any]) -> str:
        text = self._ordering_key(key) if self._ordering_key else "/".join(str(v) for v in key.values())
        if not isinstance(text, str) or not text or len(text) > 512:
            raise DecodeError("key", f"ordering key {text!r} must be 1 to 512 characters")
        return text

    def decode(self, record: Record) -> Event:
        key = self._key(record)
        ordering = self._ordering(key)
        if record.value is None:
            return Event(
                event_id=f"{self.entity}:tombstone:{_digest(record.topic, key)}",
                ordering_key=ordering, version=0, occurred_at=0,
                type=f"{self.entity}.tombstone", payload={"op": None, "key": key},
            )  # fmt: skip
        change = self._read_value(record) if self._read_value else _json(record.value, "value")
        if not isinstance(change, Mapping):
            raise DecodeError("value", f"must be a change event object, got {type(change).__name__}")
        op = change.get("op")
        if op not in OPS:
            raise DecodeError("op", f"must be one of {sorted(OPS)}, got {op!r}")
        before, after = change.get("before"), change.get("after")
        for name, image in (("before", before), ("after", after)):
            if image is not None and not isinstance(image, Mapping):
                raise DecodeError(name, f"must be a row object or null, got {type(image).__name__}")
        if op == "d":
            if after is not None:
                raise DecodeError("after", "a delete has no after image")
        elif after is None:
            raise DecodeError("after", f"op {op!r} needs the row after the change")
        image = after if after is not None else before
        for c, v in key.items():
            if image is not None and c in image and image[c] != v:
                raise DecodeError("key", f"column {c!r} is {v!r} in the key, {image[c]!r} in the row")
        source = change.get("source")
        if not isinstance(source, Mapping):
            raise DecodeError(
                "source", "missing: a change event carries its source's position and commit time"
            )
        position = position_of(source)
        ts_ms = _int(source, "ts_ms", "source")
        if ts_ms is None:
            raise DecodeError("source.ts_ms", "missing: the commit time")
        tx = change.get("transaction")
        order = (_int(tx, "total_order", "transaction") or 0) if isinstance(tx, Mapping) else 0
        version = cdc_version(op, ts_ms, order, self.snapshot_window)
        if version > MAX_VERSION:
            raise DecodeError("source.ts_ms", f"out of range: {ts_ms}")
        where = [source.get(f) for f in ("name", "db", "schema", "table")]
        return Event(
            event_id=f"{self.entity}:{op}:{_digest(where, position, key)}",
            ordering_key=ordering,
            version=version,
            occurred_at=ts_ms * 1000,
            type=f"{self.entity}.{OPS[op]}",
            payload={
                "op": op,
                "key": key,
                "before": dict(before) if before is not None else None,
                "after": dict(after) if after is not None else None,
                "committed_at": ts_ms * 1000,
                "position": position,
            },
        )

    def __repr__(self) -> str:
        return f"CdcDecoder({self.entity!r})"


def _digest(*parts: Any) -> str:
    return hashlib.sha256(_canonical(parts).encode()).hexdigest()[:40]
