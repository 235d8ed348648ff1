"""What a projector wrote, recorded at write for the change verifier (``framework.verify``).

For every write the index took, the stream's projector records (table ``converge_written``,
``WRITTEN``), per view and document, the version written, the digest of the document as the
index stores it (``document_digest``: the ``hit_digest`` of a right copy) and the digest of the
row versions it was built from (``source_versions``: the mark's write time, and per source table
the count and the sum of the live rows' versions), all from the read the projector made. A record
is written at the document's version, so a late write of an older one cannot replace a newer
record. The digests live here, below the verifier, because the projector computes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.json_codec import canonical, round_trip
from framework.core.mutations import Upsert
from framework.core.projection import PartitionKey
from framework.core.rows import Row
from framework.core.schema import Column, TableSchema
from stores.base import SearchHit, WideColumnStore
from stores.elasticsearch.checks import METADATA_FIELDS, encode_document

__all__ = [
    "WRITTEN",
    "Written",
    "as_stored",
    "hit_digest",
    "document_digest",
    "mark_version",
    "source_versions",
    "written_upsert",
    "read_written",
]


def _blake(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


#: No size limit here: a document too large to index is the projector's error, not a divergence.
_UNLIMITED = 1 << 62


def _encoded(doc: Any) -> str:
    return encode_document(doc, _UNLIMITED).decode("utf-8")


def as_stored(doc: Any) -> Any:
    """``doc`` as the index returns it: encoded as it is written (``encode_document``, whose
    errors it raises), then parsed."""
    if not isinstance(doc, Mapping) or not METADATA_FIELDS.isdisjoint(doc):
        return json.loads(_encoded(doc))  # encode_document raises its error
    return round_trip(doc, _encoded)


def hit_digest(hit: SearchHit | None, *, versions: bool = True) -> int:
    """The digest of the index's copy of a document: its version (unless ``versions`` is False)
    and content (0: absent)."""
    if hit is None:
        return 0
    source = hit.source
    content = canonical(source if type(source) is dict else dict(source))
    return _blake(b"%d:" % ((hit.version or 0) if versions else 0) + content)


#: What the projector wrote, per view and document (see the module's docstring): one text cell,
#: ``written`` (``Written.encode``), at the document's version.
WRITTEN = TableSchema(
    name="converge_written",
    partition_key=(Column("view_name", "text"), Column("doc_id", "text")),
    columns=(Column("written", "text"),),
)


@dataclass(frozen=True)
class Written:
    """A record of a write: the version written, the digest of the document (0: a delete) and of
    the row versions it was built from (0: not known)."""

    version: int
    doc: int
    rows: int

    def encode(self, at: int) -> str:
        """The cell's text; ``at`` (epoch µs, 16 hex digits first) decides between two records of
        one version: the store keeps the larger text, so the later write."""
        return f"{max(0, at):016x}:{self.version:x}:{self.doc:x}:{self.rows:x}"

    @staticmethod
    def decode(text: str) -> Written:
        """The record a cell's text holds."""
        _, version, doc, rows = text.split(":")
        return Written(int(version, 16), int(doc, 16), int(rows, 16))


def document_digest(doc: Any, version: int, *, versions: bool = True) -> int:
    """The ``hit_digest`` of the index's copy of ``doc`` written at ``version`` (0: None, a
    delete)."""
    if doc is None:
        return 0
    return hit_digest(SearchHit("", version, as_stored(doc)), versions=versions)


def mark_version(mark: Row | None) -> int | None:
    """The write time of a partition's version mark (None: no mark)."""
    cell = None if mark is None else mark.cells.get("version")
    return None if cell is None else cell.writetime


def source_versions(mark: Row | None, rows: Mapping[str, Sequence[Row]]) -> int:
    """The digest of the row versions a document is built from: the mark's write time, and per
    source table the count and the sum of the versions of its live rows."""
    parts: list[tuple[str, int, int]] = []
    for table in sorted(rows):
        live = [r.version for r in rows[table] if r.cells]
        parts.append((table, len(live), sum(live)))
    return _blake(repr((mark_version(mark), parts)).encode("utf-8", "surrogatepass"))


def written_upsert(view: str, doc_id: str, written: Written, at: int) -> Upsert:
    """The record of ``written`` at its version (``at``: now, epoch µs, see ``Written.encode``)."""
    key = {"view_name": view, "doc_id": doc_id}
    return Upsert(WRITTEN.name, key, {"written": written.encode(at)}, max(0, written.version))


async def read_written(store: WideColumnStore, view: str, doc_ids: Sequence[str]) -> list[Written | None]:
    """The records of ``view``'s documents ``doc_ids``, in order (None: none)."""
    keys: list[PartitionKey] = [{"view_name": view, "doc_id": d} for d in doc_ids]
    out: list[Written | None] = []
    for row in await store.read_rows(WRITTEN.name, keys):
        cell = None if row is None else row.cells.get("written")
        out.append(None if cell is None else Written.decode(str(cell.value)))
    return out
