"""A portable file of parked events: plain JSON lines, readable with any tool, importable again.

The first line describes the file (``format``, ``version``, ``exported_at`` and the
filter); every other line is one record as ``record_to_json`` writes it (key and
value in base64) with its original ``lsn`` and segment ``status``, in write order.
Records of a damaged segment that cannot be read are left out and reported
(``ExportReport.damaged``); the readable ones are exported.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter
from framework.dlq.record import ParkedRecord, record_from_json, record_to_json
from framework.dlq.segment import fsync_dir
from framework.dlq.store import DeadLetterStore, Entry, SegmentEnd
from framework.dlq.wal import DeadLetterWAL

__all__ = ["EXPORT_FORMAT", "ExportReport", "export_records", "read_export", "import_file"]

EXPORT_FORMAT = "converge-dlq-export"
EXPORT_VERSION = 1


@dataclass(frozen=True)
class ExportReport:
    """Records written, and the damaged segments whose ``unreadable`` records could not be."""

    records: int
    damaged: tuple[SegmentHealth, ...] = ()

    @property
    def unreadable(self) -> int:
        """Records of the selected segments that could not be read."""
        return sum(h.unreadable for h in self.damaged)


def _write(out: IO[str], store: DeadLetterStore, flt: SegmentFilter) -> ExportReport:
    header = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exported_at": store.clock(),
              "filter": {k: v for k, v in asdict(flt).items() if v is not None}}  # fmt: skip
    out.write(json.dumps(header, ensure_ascii=False, default=str) + "\n")
    n = 0
    damaged: list[SegmentHealth] = []
    for item in store.merged(flt):
        if isinstance(item, Entry):
            line = record_to_json(item.record, item.lsn) | {"status": item.segment.status.value}
            out.write(json.dumps(line, ensure_ascii=True, allow_nan=False) + "\n")
            n += 1
        elif isinstance(item, SegmentEnd) and item.health.damaged:
            damaged.append(item.health)
    return ExportReport(n, tuple(damaged))


def export_records(store: DeadLetterStore, flt: SegmentFilter, out: str | Path) -> ExportReport:
    """Write the records matching ``flt`` (live ones unless ``flt.statuses``) to ``out`` ('-' = stdout).

    A file is written to a fresh temporary file created exclusively in ``out``'s directory
    (mode 0600; a planted file or symlink is never followed), fsynced and renamed over
    ``out``, so it is complete or absent.
    """
    if str(out) == "-":
        return _write(sys.stdout, store, flt)
    path = Path(out)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            report = _write(f, store, flt)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return report


def read_export(path: str | Path) -> Iterator[tuple[dict[str, Any], ParkedRecord]]:
    """``(line object, record)`` of every record line; ``ValueError`` naming the first bad line
    (not UTF-8, not JSON, not a record, or nested too deeply to parse)."""
    with open(path, "rb") as f:
        first = f.readline()
        try:
            header = json.loads(first.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            header = None
        if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
            raise ValueError(f"{path}: not a {EXPORT_FORMAT} file")
        if header.get("version") != EXPORT_VERSION:
            raise ValueError(f"{path}: unsupported version {header.get('version')!r}")
        for n, line in enumerate(f, start=2):
            if not line.strip():
                continue
            try:
                obj = json.loads(line.decode("utf-8"))
                record = record_from_json(obj)
            except ValueError as exc:  # JSONDecodeError is a ValueError
                raise ValueError(f"{path}:{n}: {exc}") from None
            except RecursionError:  # a line nested deeper than the parser's recursion limit
                raise ValueError(f"{path}:{n}: nested too deeply to be a record") from None
            yield obj, record


def import_file(wal: DeadLetterWAL, path: str | Path) -> int:
    """Park every record of an export file again, in file order; the whole file is checked first."""
    records = [rec for _, rec in read_export(path)]
    for rec in records:
        wal.park_sync(rec)
    return len(records)
