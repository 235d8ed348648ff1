"""Archived events: JSON lines or Parquet files, as the backfill reads them.

JSON lines hold one event per line (``Event.to_json``), optionally gzip
compressed. They are read as raw bytes and split on ``\n`` only (a ``\r``
before it is dropped), so every line reaches ``parse_event`` exactly as
archived: a line that is not UTF-8 or contains a bare ``\r`` is parked with
its exact bytes instead of being re-encoded or split, and no schema inference
adds null fields (which mean "clear this cell" to the agents). Each file is
read whole by one task: archive big histories as many files. Parquet files
have the columns ``event_id``, ``ordering_key``, ``version``, ``occurred_at``,
``type`` and ``payload``, the payload being its JSON text for the same reason.

Archives in the source's own format (a topic whose agent has a ``decoder``, e.g. a table's CDC
changes) hold raw Kafka records instead: format ``records``, one record per line as
``framework.decoders.record_to_json`` writes it (``{topic, partition, offset, timestamp, key,
value, headers}``, bytes in base64), detected by a file name containing ``.records.`` (e.g.
``tickets.records.jsonl.gz``). Each line reaches the backfill as ``("record", line)``, which
decodes it with the decoder of the agent consuming its topic, as the stream does.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import RDD
from pyspark.sql import SparkSession

from framework.core.events import Event
from framework.decoders.base import Record, record_to_json

__all__ = [
    "ArchiveFormat",
    "PARQUET_SCHEMA",
    "detect_format",
    "read_archive",
    "write_jsonl",
    "write_parquet",
    "write_records",
]

ArchiveFormat = Literal["auto", "jsonl", "parquet", "records"]
_COLUMNS = ("event_id", "ordering_key", "version", "occurred_at", "type", "payload")
#: The Parquet layout of archived events.
PARQUET_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("ordering_key", pa.string()),
        ("version", pa.int64()),
        ("occurred_at", pa.int64()),
        ("type", pa.string()),
        ("payload", pa.string()),
    ]
)


def detect_format(paths: Sequence[str]) -> Literal["jsonl", "parquet", "records"]:
    """``parquet`` when the first path is a Parquet file or a directory of them, ``records`` when
    its name contains ``.records.`` (a directory: of its files), else ``jsonl``."""
    first = Path(paths[0])
    if first.suffix == ".parquet" or (first.is_dir() and any(first.rglob("*.parquet"))):
        return "parquet"
    if ".records." in first.name or (first.is_dir() and any(first.rglob("*.records.*"))):
        return "records"
    return "jsonl"


def _record_line(line: bytes) -> tuple[str, bytes]:
    return ("record", line)


def _from_parquet(row: Any) -> dict[str, Any]:
    d = row.asDict()
    payload = d.get("payload")
    d["payload"] = json.loads(payload) if isinstance(payload, str) else payload
    return d


def _lines(file: tuple[str, bytes]) -> Iterable[bytes]:
    """The non-blank lines of one archive file, as bytes (gunzipped when compressed)."""
    _, data = file
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    for line in data.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            yield line


def read_archive(
    spark: SparkSession, paths: Sequence[str], fmt: ArchiveFormat = "auto", partitions: int | None = None
) -> RDD:
    """An RDD of raw events (JSON lines as bytes, or decoded Parquet rows) for ``parse_event``.

    ``partitions`` repartitions the input (default: as the files split).
    """
    if not paths:
        raise ValueError("no input paths")
    kind = detect_format(paths) if fmt == "auto" else fmt
    rdd: RDD[Any]
    if kind == "parquet":  # repartitioned by the JVM: rows cross into Python once, after the shuffle
        frame = spark.read.parquet(*paths).select(*_COLUMNS)
        return (frame.repartition(partitions) if partitions else frame).rdd.map(_from_parquet)
    if kind in ("jsonl", "records"):
        sc = spark.sparkContext
        rdd = sc.union([sc.binaryFiles(p) for p in paths]).flatMap(_lines)
        if kind == "records":
            rdd = rdd.map(_record_line)
    else:
        raise ValueError(f"unknown archive format {fmt!r}")
    return rdd.repartition(partitions) if partitions else rdd


def _write_lines(lines: Iterable[bytes], path: str | Path) -> int:
    """Write ``lines`` (newline-terminated here; gzip when ``path`` ends in ``.gz``); returns the count."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    n = 0
    with opener(path, "wb") as f:
        for line in lines:
            f.write(line + b"\n")
            n += 1
    return n


def write_jsonl(events: Iterable[Event], path: str | Path) -> int:
    """Write ``events`` as JSON lines (gzip when ``path`` ends in ``.gz``); returns the count."""
    return _write_lines((e.to_json() for e in events), path)


def write_records(records: Iterable[Record], path: str | Path) -> int:
    """Write raw ``records`` as JSON lines (format ``records``; gzip when ``path`` ends in ``.gz``)."""
    return _write_lines((record_to_json(r) for r in records), path)


def write_parquet(events: Iterable[Event], path: str | Path) -> int:
    """Write ``events`` as one Parquet file; returns the count."""
    rows = [e.to_dict() for e in events]
    for r in rows:
        r["payload"] = json.dumps(r["payload"], separators=(",", ":"), sort_keys=True)
    table = pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA)
    pq.write_table(table, str(path))
    return len(rows)
