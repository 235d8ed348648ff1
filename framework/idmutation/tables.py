"""The store tables of the ID mutation job: accepted requests, the collapsed map, per-batch work.

- ``converge_id_requests`` (partition ``tenant``): every accepted request, keyed by its request
  id and a digest of its content, so conflicting duplicates are all kept and ``collapse`` decides.
- ``converge_id_map`` (partition ``(tenant, id)``): the intervals of every id with a move-away,
  as JSON, written at the version of the batch that changed them (the stream's lookup reads
  the same entries from the map topic).
- ``converge_id_batches`` (partition ``(job, batch, kind, bucket)``): what one batch touched:
  ``kind = "tenant"`` the tenants whose requests it stored, ``kind = "change"`` the map entries
  it changed (with their intervals), recorded before the map itself, so a repaired process
  finds the same work.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence

from framework.core.mutations import CellValue, Upsert
from framework.core.rows import Row, cell_int
from framework.core.schema import Column, TableSchema
from framework.idmutation.collapse import Interval
from framework.idmutation.requests import IdRequest

__all__ = [
    "REQUESTS_TABLE",
    "MAP_TABLE",
    "BATCH_TABLE",
    "ID_TABLES",
    "BUCKETS",
    "bucket_of",
    "request_row",
    "request_of_row",
    "encode_intervals",
    "decode_intervals",
    "map_row",
    "batch_row",
]

REQUESTS_TABLE = TableSchema(
    name="converge_id_requests",
    partition_key=(Column("tenant", "text"),),
    clustering_key=(Column("request_id", "text"), Column("digest", "text")),
    columns=(
        Column("executed_at", "bigint"),
        Column("op", "text"),
        Column("old_id", "text"),
        Column("new_id", "text"),
    ),  # fmt: skip
)
MAP_TABLE = TableSchema(
    name="converge_id_map",
    partition_key=(Column("tenant", "text"), Column("id", "text")),
    columns=(Column("intervals", "text"), Column("batch", "bigint")),
)
BATCH_TABLE = TableSchema(
    name="converge_id_batches",
    partition_key=(
        Column("job", "text"),
        Column("batch", "bigint"),
        Column("kind", "text"),
        Column("bucket", "int"),
    ),  # fmt: skip
    clustering_key=(Column("tenant", "text"), Column("id", "text")),
    columns=(Column("intervals", "text"),),
)
ID_TABLES = (REQUESTS_TABLE, MAP_TABLE, BATCH_TABLE)
#: Partitions of one batch's work list per kind.
BUCKETS = 16


def bucket_of(tenant: str, ident: str = "") -> int:
    """The work-list bucket of ``(tenant, id)``."""
    return zlib.crc32(f"{tenant}\x00{ident}".encode("utf-8", "surrogatepass")) % BUCKETS


def request_row(r: IdRequest) -> Upsert:
    """The stored form of an accepted request (written at its execution time: the same on re-runs)."""
    body = json.dumps(r.to_dict(), sort_keys=True, separators=(",", ":"))
    digest = hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    cells = {"executed_at": r.executed_at, "op": r.op, "old_id": r.old_id, "new_id": r.new_id}
    return Upsert(REQUESTS_TABLE.name, {"tenant": r.tenant, "request_id": r.request_id, "digest": digest},
                  cells, r.executed_at)  # fmt: skip


def request_of_row(row: Row) -> IdRequest:
    """``request_row`` read back."""
    c = row.values()
    return IdRequest(
        executed_at=cell_int(c["executed_at"]),
        request_id=str(row.key["request_id"]),
        tenant=str(row.key["tenant"]),
        op=str(c["op"]),  # type: ignore[arg-type]
        old_id=str(c["old_id"]),
        new_id=None if c.get("new_id") is None else str(c["new_id"]),
    )


def encode_intervals(intervals: Sequence[Interval]) -> str:
    """Intervals as compact JSON: ``[[after, upto, final], ...]`` (null: unbounded, or deleted)."""
    return json.dumps([list(i) for i in intervals], separators=(",", ":"))


def decode_intervals(text: str) -> list[Interval]:
    """``encode_intervals`` inverted."""
    return [(a, u, f) for a, u, f in json.loads(text)]


def map_row(tenant: str, ident: str, intervals: Sequence[Interval], batch: int, version: int) -> Upsert:
    """The map entry of ``(tenant, id)`` as batch ``batch`` computed it."""
    cells: dict[str, CellValue] = {"intervals": encode_intervals(intervals), "batch": batch}
    return Upsert(MAP_TABLE.name, {"tenant": tenant, "id": ident}, cells, version)


def batch_row(job: str, batch: int, kind: str, tenant: str, ident: str, version: int,
              intervals: Sequence[Interval] | None = None) -> Upsert:  # fmt: skip
    """One line of a batch's work list (``kind`` ``tenant`` or ``change``)."""
    key: dict[str, CellValue] = {"job": job, "batch": batch, "kind": kind, "bucket": bucket_of(tenant, ident),
           "tenant": tenant,
           "id": ident}  # fmt: skip
    cells = {"intervals": "" if intervals is None else encode_intervals(intervals)}
    return Upsert(BATCH_TABLE.name, key, cells, version)
