"""The segment file: an append-only log of checksummed JSON lines.

Every line is ``CRC SP JSON LF``: ``CRC`` is the CRC-32 of the JSON bytes as 8
hex digits and ``JSON`` is ASCII (no raw newline can occur in it). The first
line is a header naming the partition; every other line is one record (see
``record_to_json``) with its log sequence number ``lsn``. A line without its
newline (a torn write) or whose checksum does not match is skipped (with a
warning unless the reader is ``quiet``) and reported in ``SegmentReader.damage``;
the lines before and after it are read normally.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from framework.dlq.record import ParkedRecord, Partition, record_from_json

__all__ = [
    "FORMAT_VERSION", "Damage", "encode_line", "decode_line", "SegmentWriter", "SegmentReader", "fsync_dir",
]  # fmt: skip

log = logging.getLogger("framework.dlq")

FORMAT_VERSION = 1
_HEADER_KEY = "converge_dlq_segment"


class Damage(NamedTuple):
    """Bytes of a segment file that could not be read: where, how many, and why."""

    offset: int
    length: int
    reason: str


def encode_line(obj: dict[str, Any]) -> bytes:
    """One checksummed line for ``obj``."""
    payload = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    return b"%08x " % zlib.crc32(payload) + payload + b"\n"


def decode_line(line: bytes) -> dict[str, Any]:
    """The object of a complete line; ``ValueError`` when torn, corrupt or not an object."""
    if not line.endswith(b"\n"):
        raise ValueError("torn line (no newline)")
    if len(line) < 10 or line[8:9] != b" ":
        raise ValueError("malformed line")
    payload = line[9:-1]
    try:
        crc = int(line[:8], 16)
    except ValueError:
        raise ValueError("malformed checksum") from None
    if zlib.crc32(payload) != crc:
        raise ValueError("checksum mismatch")
    obj = json.loads(payload)
    if not isinstance(obj, dict):
        raise ValueError("line is not a JSON object")
    return obj


def fsync_dir(path: Path) -> None:
    """Make the directory entries of ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Indirections so a crash test can stop a child process between write and fsync.
_datasync = os.fdatasync


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class SegmentWriter:
    """The open (appendable) segment of one partition; every append is fsynced before it returns."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size

    @classmethod
    def create(cls, path: Path, part: Partition, created_at: float) -> SegmentWriter:
        """Create ``path`` (must not exist) with its header, durably, including its directory entry."""
        new_dirs = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
        for attempt in range(3):  # a concurrent cleanup may remove an empty directory meanwhile
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o640)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        try:
            header = encode_line({_HEADER_KEY: FORMAT_VERSION, **part._asdict(), "created_at": created_at})
            _write_all(fd, header)
            _datasync(fd)
        except BaseException:
            os.close(fd)
            raise
        for d in [path.parent, *(p.parent for p in reversed(new_dirs))]:
            fsync_dir(d)
        return cls(path, fd, len(header))

    def append(self, data: bytes) -> int:
        """Append encoded lines and fsync; returns the new file size."""
        _write_all(self._fd, data)
        _datasync(self._fd)
        self.size += len(data)
        return self.size

    def close(self) -> None:
        """Close the file descriptor (the data is already durable)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class SegmentReader:
    """Iterates ``(lsn, record)`` of a segment file, up to ``limit`` bytes when given.

    After iteration: ``header`` (the header object or None), ``count``, the
    earliest/latest ``parked_at`` (``first_ts``/``last_ts``), ``first_lsn``/``last_lsn``
    of the good records, ``good_end`` (the byte after the last good line, header
    included), ``size`` (bytes read) and ``damage``: a ``Damage`` for every skipped line.
    """

    path: Path
    limit: int | None = None
    quiet: bool = False
    header: dict[str, Any] | None = None
    count: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    first_lsn: int | None = None
    last_lsn: int | None = None
    good_end: int = 0
    size: int = 0
    damage: list[Damage] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[int, ParkedRecord]]:
        with open(self.path, "rb") as f:
            pos = 0
            while self.limit is None or pos < self.limit:
                line = f.readline() if self.limit is None else f.readline(self.limit - pos)
                if not line:
                    break
                start, pos = pos, pos + len(line)
                self.size = pos
                try:
                    obj = decode_line(line)
                    if start == 0:
                        if obj.get(_HEADER_KEY) != FORMAT_VERSION:
                            raise ValueError("not a converge dead-letter segment header")
                        self.header = obj
                        self.good_end = pos
                        continue
                    lsn = obj.get("lsn")
                    if not isinstance(lsn, int):
                        raise ValueError("record without lsn")
                    rec = record_from_json(obj)
                except ValueError as exc:
                    self._damaged(start, len(line), str(exc))
                    continue
                self._count(lsn, rec)
                self.good_end = pos
                yield lsn, rec

    def _count(self, lsn: int, rec: ParkedRecord) -> None:
        self.count += 1
        ts = rec.parked_at
        if self.first_lsn is None:
            self.first_lsn = lsn
        self.last_lsn = lsn
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def _damaged(self, offset: int, length: int, reason: str) -> None:
        self.damage.append(Damage(offset, length, reason))
        if not self.quiet:
            log.warning("dead-letter segment %s: skipped %d damaged bytes at offset %d (%s)",
                        self.path, length, offset, reason)  # fmt: skip

    def scan(self) -> SegmentReader:
        """Read the whole file (for its counters and damage report); returns self."""
        for _ in self:
            pass
        return self
