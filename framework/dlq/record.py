"""A parked event, the partition it belongs to, and its portable JSON form."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

__all__ = ["ParkedRecord", "Partition", "record_to_json", "record_from_json", "MAX_ERROR_CHARS"]

MAX_ERROR_CHARS = 16_000
_TRUNCATED = " ...[truncated]"


@dataclass(frozen=True)
class ParkedRecord:
    """An event the runtime gave up on: where it came from, its exact bytes and why it failed."""

    pipeline: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    stage: str
    error_class: str
    error: str
    parked_at: float = 0.0
    event_type: str = "unknown"

    def validate(self) -> None:
        """Raise ``TypeError``/``ValueError`` when a field cannot be stored faithfully."""
        for name in ("pipeline", "topic", "stage", "error_class", "error", "event_type"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"ParkedRecord.{name} must be str, got {type(getattr(self, name)).__name__}")
        for name in ("partition", "offset"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"ParkedRecord.{name} must be int, got {type(v).__name__}")
        for name in ("key", "value"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, bytes | bytearray | memoryview):
                raise TypeError(f"ParkedRecord.{name} must be bytes or None, got {type(v).__name__}")
        if not isinstance(self.parked_at, int | float) or not math.isfinite(self.parked_at):
            raise ValueError(f"ParkedRecord.parked_at must be a finite number, got {self.parked_at!r}")

    @property
    def partition_key(self) -> Partition:
        """The WAL partition of this record."""
        return Partition(self.pipeline, self.event_type, self.stage, self.error_class)


class Partition(NamedTuple):
    """The four dimensions parked events are grouped by."""

    pipeline: str
    event_type: str
    stage: str
    error_class: str


def _b64(b: bytes | bytearray | memoryview | None) -> str | None:
    return None if b is None else base64.b64encode(bytes(b)).decode("ascii")


def _unb64(s: Any) -> bytes | None:
    if s is None:
        return None
    if not isinstance(s, str):
        raise ValueError("key/value must be a base64 string or null")
    return base64.b64decode(s.encode("ascii"), validate=True)


def record_to_json(rec: ParkedRecord, lsn: int | None = None) -> dict[str, Any]:
    """A JSON-safe dict of ``rec`` (bytes as base64, long errors truncated), with its ``lsn`` if given."""
    error = rec.error
    if len(error) > MAX_ERROR_CHARS:
        error = error[: MAX_ERROR_CHARS - len(_TRUNCATED)] + _TRUNCATED
    out: dict[str, Any] = {} if lsn is None else {"lsn": lsn}
    out.update(
        pipeline=rec.pipeline, event_type=rec.event_type, stage=rec.stage, error_class=rec.error_class,
        topic=rec.topic, partition=rec.partition, offset=rec.offset,
        key=_b64(rec.key), value=_b64(rec.value), error=error, parked_at=float(rec.parked_at),
    )  # fmt: skip
    return out


_NAMES = tuple(f.name for f in fields(ParkedRecord))


def record_from_json(d: Any) -> ParkedRecord:
    """The record encoded by ``record_to_json``; ``ValueError`` on any malformed field."""
    if not isinstance(d, dict):
        raise ValueError("record must be a JSON object")
    missing = [n for n in _NAMES if n not in d]
    if missing:
        raise ValueError(f"record lacks {', '.join(missing)}")
    try:
        rec = ParkedRecord(
            pipeline=d["pipeline"], topic=d["topic"], partition=d["partition"], offset=d["offset"],
            key=_unb64(d["key"]), value=_unb64(d["value"]), stage=d["stage"],
            error_class=d["error_class"], error=d["error"], parked_at=d["parked_at"],
            event_type=d["event_type"],
        )  # fmt: skip
        rec.validate()
    except (TypeError, ValueError) as exc:  # binascii.Error is a ValueError
        raise ValueError(f"malformed record: {exc}") from exc
    return rec
