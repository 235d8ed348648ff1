"""Pending re-projections: the documents a job's store process changed, recorded for its index process.

A job that writes source tables of a projection (retention, ID mutation)
records in its store process, in the same ``apply`` as the writes, one row per
changed document in ``PENDING_TABLE`` under (job, batch, bucket); its index
process then re-projects them (``reproject_pending``): one read per chunk of
partitions, one bulk request per chunk. A batch repaired in its index process
alone finds its rows again.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from framework.core.errors import ConvergeError
from framework.core.mutations import CellValue, Upsert
from framework.core.projection import Projection
from framework.core.schema import Column, TableSchema
from framework.notifications.entries import decode_keys, key_ident
from framework.runtime.projector import read_documents
from stores.base import IndexOp, SearchIndex, WideColumnStore

__all__ = [
    "PENDING_BUCKETS",
    "PENDING_TTL",
    "PENDING_TABLE",
    "ReprojectionError",
    "pending_row",
    "reproject_pending",
]

#: Buckets of one batch's pending re-projections (partitions of ``PENDING_TABLE``).
PENDING_BUCKETS = 16
#: Seconds a pending re-projection row lives (the index process reads it within the run).
PENDING_TTL = 30 * 86_400

#: Documents a job's batch must re-project, per (job, batch, bucket).
PENDING_TABLE = TableSchema(
    name="converge_retention_pending",
    partition_key=(Column("job", "text"), Column("batch", "bigint"), Column("bucket", "int")),
    clustering_key=(Column("projection", "text"), Column("doc_id", "text")),
    columns=(Column("key", "text"),),
)


class ReprojectionError(ConvergeError, RuntimeError):
    """Pending documents cannot be re-projected (no index given, or the index refused some)."""


def pending_row(
    job: str, batch: int, projection: str, doc_id: str, key: Mapping[str, CellValue], version: int
) -> Upsert:
    """The row recording that batch ``batch`` of ``job`` changed document ``doc_id`` (partition
    ``key`` of ``projection``), written at ``version``."""
    bucket = zlib.crc32(doc_id.encode("utf-8", "surrogatepass")) % PENDING_BUCKETS
    row_key: dict[str, CellValue] = {
        "job": job, "batch": batch, "bucket": bucket, "projection": projection, "doc_id": doc_id,
    }  # fmt: skip
    return Upsert(PENDING_TABLE.name, row_key, {"key": key_ident(key)}, version, PENDING_TTL)


async def reproject_pending(
    store: WideColumnStore,
    index: SearchIndex | None,
    projections: Sequence[Projection],
    job: str,
    batch: int,
    *,
    chunk: int = 500,
) -> dict[str, int]:
    """Re-project every document batch ``batch`` of ``job`` recorded as pending: one read per
    chunk of partitions, one bulk request per chunk. Counts per outcome."""
    by_name = {p.name: p for p in projections}
    counts = {"documents": 0, "ok": 0, "stale": 0}
    for bucket in range(PENDING_BUCKETS):
        rows = await store.read_partition(PENDING_TABLE.name, {"job": job, "batch": batch, "bucket": bucket})
        wanted: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            name, key = str(row.key["projection"]), row.values().get("key")
            if name in by_name and isinstance(key, str):
                wanted.setdefault(name, []).append(decode_keys(f"[{key}]")[0])
        for name, keys in wanted.items():
            if index is None:
                raise ReprojectionError(f"{len(keys)} documents of {name} to re-project and no index given")
            p = by_name[name]
            for start in range(0, len(keys), chunk):
                documents = await read_documents(store, p, keys[start : start + chunk])
                ops = [IndexOp(doc_id, version, doc) for doc_id, doc, version in documents]
                result = await index.bulk(p.alias, ops)
                if result.failed:
                    first = result.failed[0]
                    raise ReprojectionError(
                        f"bulk {p.alias}: {len(result.failed)} failed ({first.doc_id}: {first.reason})"
                    )
                counts["documents"] += len(ops)
                counts["stale"] += sum(1 for i in result.items if i.outcome == "stale")
                counts["ok"] += sum(1 for i in result.items if i.outcome == "ok")
    return counts
