"""Digests of what a document is built from and of what the index holds, and the ledger of
verified ones that makes a full sweep cheap.

A document verified right is recorded in the ledger (table ``converge_verified`` in the app's
wide-column store) with two digests: of the rows it was built from (its partition's rows in
every source table and its version mark: ``rows_digest``) and of the index's copy (its version
and content: ``hit_digest``). A projection is pure, so while both digests are unchanged the
document is still right; a sweep (``framework.verify.sweep``) computes both sides' digests from
a scan and builds and compares in full only the documents whose digests differ from their
record. A row's digest is the same however it was read (a scan or a partition read), and a
partition's is the exclusive-or of its rows', so the order rows arrive in does not matter.

The ledger is partitioned by app, view and ``BUCKETS`` buckets of the document id, so one
bucket is one partition read.

What the projector wrote is recorded at write (table ``converge_written``, ``WRITTEN``): per
view and document, the version written, the digest of the document as the index stores it
(``document_digest``, equal to the ``hit_digest`` of a right copy) and the digest of the row
versions it was built from (``source_versions``: the mark's write time, and per source table
the count and the sum of the live rows' versions, from the read the projector made). The
change verifier compares the index's copy and the partition's mark with that record
(``framework.verify.verifier``) and rebuilds from the rows only what disagrees and a sample.
A record is written at the document's version, so a late write of an older one cannot replace
a newer record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from framework.core.mutations import Delete, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from framework.runtime.written_records import (
    WRITTEN,
    Written,
    document_digest,
    hit_digest,
    mark_version,
    read_written,
    source_versions,
    written_upsert,
)
from stores.base import WideColumnStore

__all__ = [
    "BUCKETS",
    "LEDGER",
    "Record",
    "Ledger",
    "bucket_of",
    "row_digest",
    "rows_digest",
    "hit_digest",
    "WRITTEN",
    "Written",
    "document_digest",
    "source_versions",
    "mark_version",
    "written_upsert",
    "read_written",
]

#: Buckets of a view's ledger (one store partition each).
BUCKETS = 16384
#: The ledger of verified documents.
LEDGER = TableSchema(
    name="converge_verified",
    partition_key=(Column("app", "text"), Column("view_name", "text"), Column("bucket", "int")),
    clustering_key=(Column("doc_id", "text"),),
    columns=(Column("index_digest", "text"), Column("rows_digest", "text")),
)


def _blake(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


def bucket_of(doc_id: str) -> int:
    """The ledger bucket of a document id."""
    digest = hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def row_digest(table: str, row: Row) -> int:
    """A row's digest: its table, key and live cells (value and write time)."""
    cells = sorted((name, c.value, c.writetime) for name, c in row.cells.items())
    text = repr((table, sorted(row.key.items()), cells))
    return _blake(text.encode("utf-8", "surrogatepass"))


def rows_digest(version_table: str, mark: Row | None, rows: Mapping[str, Sequence[Row]]) -> int:
    """The digest of what one document is built from: its version mark and its rows (0: none)."""
    out = 0 if mark is None or not mark.cells else row_digest(version_table, mark)
    for table, read in rows.items():
        for row in read:
            if row.cells:
                out ^= row_digest(table, row)
    return out


@dataclass(frozen=True)
class Record:
    """A document verified right: the digests of its index copy and of its rows."""

    doc_id: str
    index_digest: int
    rows_digest: int


class Ledger:
    """The verified documents of one app's views in ``store`` (created by ``ensure``)."""

    def __init__(self, store: WideColumnStore, app: str) -> None:
        self.store, self.app = store, app

    async def ensure(self) -> None:
        await self.store.ensure_table(LEDGER)

    def _key(self, view: str, bucket: int) -> dict[str, str | int]:
        return {"app": self.app, "view_name": view, "bucket": bucket}

    async def read(self, view: str, buckets: Sequence[int]) -> dict[str, Record]:
        """The records of ``view`` in ``buckets``, by document id."""
        parts = await self.store.read_partitions(LEDGER.name, [self._key(view, b) for b in buckets])
        out: dict[str, Record] = {}
        for rows in parts:
            for row in rows:
                cells = row.values()
                doc_id = str(row.key["doc_id"])
                out[doc_id] = Record(doc_id, int(str(cells.get("index_digest") or "0"), 16),
                                     int(str(cells.get("rows_digest") or "0"), 16))  # fmt: skip
        return out

    async def record(self, view: str, records: Iterable[Record], version: int) -> None:
        """Write ``records`` at write time ``version`` (a document right as absent on both sides,
        both digests 0, is removed)."""
        writes: list[Mutation] = []
        for r in records:
            key = {**self._key(view, bucket_of(r.doc_id)), "doc_id": r.doc_id}
            if r.index_digest == 0 and r.rows_digest == 0:
                writes.append(Delete(LEDGER.name, key, version))
            else:
                cells = {"index_digest": f"{r.index_digest:x}", "rows_digest": f"{r.rows_digest:x}"}
                writes.append(Upsert(LEDGER.name, key, cells, version))
        if writes:
            await self.store.apply(writes)
