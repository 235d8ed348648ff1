"""What a projector last wrote of each document, so a rewrite its last read already covered is not sent.

A change record names the partitions a batch changed, but the projector
reads each partition's current rows: a partition announced by several
records is often read after all of them landed, and its later
announcements give the very document, at the very version, that was just
written (a quarter of the demo's index writes). ``WrittenDocuments``
remembers, per document id, the version and content digest of the last
write the index accepted (or rejected as older than what it holds), and
*which records that write's read covered*.

Identical content at an identical version does not prove the index still
holds it: other writers (erasure, the retention and ID-mutation
re-projections, Spark repair, reindex catch-up, backfill ``--project``,
Spark ingest) write documents into the index at the partition's version
mark, and a document's content can change without raising the mark (an
older event arriving late, a retention or erasure tombstone below it, a TTL
expiry) and then change back. If another writer indexed the intermediate
content, a skip would leave it there. So a write is skipped only when
every record naming the document now was already in the change topic when
the read behind the last write began: a record is published after its
write is durable, so that read saw the write, and the record brings
nothing new. Any change after that read is announced by a later record,
which is never skipped, so the projector writes the store's content over
whatever another writer indexed meanwhile. The projector knows which
records were in the topic from those it has taken from it and, where the
runtime gives it, the consumer's high watermark.

A write with the same version but other content is always sent, and so is
every write after ``forget``, which the runtime calls on every rebalance.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence

from framework.core.json_codec import canonical
from stores.base import IndexOp

__all__ = ["Fingerprint", "Position", "WrittenDocuments"]

#: ``(version, digest)`` of a write; the digest is None for a delete.
Fingerprint = tuple[int, bytes | None]
#: A change record's place: ``(topic partition, offset)``.
Position = tuple[Hashable, int]


def _fingerprint(op: IndexOp) -> Fingerprint | None:
    """None when the document cannot be digested (it is then always written)."""
    if op.doc is None:
        return op.version, None
    try:
        data = canonical(op.doc)
    except (TypeError, ValueError):  # not JSON, or text with a lone surrogate
        return None
    return op.version, hashlib.blake2b(data, digest_size=16).digest()


class WrittenDocuments:
    """The fingerprints of up to ``capacity`` recently written documents (least recent dropped),
    each with the last record position its read covered."""

    def __init__(self, capacity: int = 20_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.skipped = 0  # writes dropped as identical to the last one, since start
        self._last: OrderedDict[str, tuple[Fingerprint, Position | None]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._last)

    def new_writes(
        self,
        ops: Sequence[IndexOp],
        heard: Mapping[str, Position] | None = None,
        read_after: Mapping[Hashable, int] | None = None,
    ) -> tuple[list[IndexOp], list[tuple[str, Fingerprint, Position | None]]]:
        """The ops to send, and what to ``record`` once the index has taken them.

        ``heard``: per document, the position of the latest record naming it now (a document
        without one is always sent); ``read_after``: per topic partition, the last offset known
        to be in the topic before the read that built ``ops`` began. An op is dropped only when
        it equals the last write of its document and that write's read covered ``heard``."""
        heard = heard or {}
        read_after = read_after or {}
        send: list[IndexOp] = []
        records: list[tuple[str, Fingerprint, Position | None]] = []
        for op in ops:
            fp = _fingerprint(op)
            at = heard.get(op.doc_id)
            last = self._last.get(op.doc_id)
            if fp is not None and last is not None and last[0] == fp and _covers(last[1], at):
                self._last.move_to_end(op.doc_id)
                self.skipped += 1
                continue
            send.append(op)
            if fp is not None:
                covered = None if at is None or at[0] not in read_after else (at[0], read_after[at[0]])
                records.append((op.doc_id, fp, covered))
        return send, records

    def record(self, records: Sequence[tuple[str, Fingerprint, Position | None]]) -> None:
        """Remember writes the index has taken (or found older than what it holds)."""
        last = self._last
        for doc_id, fp, covered in records:
            last[doc_id] = (fp, covered)
            last.move_to_end(doc_id)
        while len(last) > self.capacity:
            last.popitem(last=False)

    def forget(self) -> None:
        """Drop every fingerprint (after a rebalance, another worker may have written since)."""
        self._last.clear()


def _covers(covered: Position | None, at: Position | None) -> bool:
    """True when the record at ``at`` was in the topic before the read behind ``covered``."""
    return covered is not None and at is not None and at[0] == covered[0] and at[1] <= covered[1]
