"""What a projector last wrote of each document, so an identical rewrite is not sent again.

A change record names the partitions a batch changed, but the projector
reads each partition's current rows: a partition announced by several
records is often read after all of them landed, and its later
announcements give the very document, at the very version, that was just
written (a quarter of the demo's index writes). ``WrittenDocuments``
remembers, per document id, the version and content digest of the last
write the index accepted (or rejected as older than what it holds), so such
a rewrite can be dropped: the index already holds that document at that
version or a newer one.

A write with the same version but other content is still sent (an older
event that arrived late adds cells without raising the version mark), and
so is every write after ``forget``, which the runtime calls on every
rebalance: another worker may have written the documents meanwhile.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence

from stores.base import IndexOp

__all__ = ["Fingerprint", "WrittenDocuments"]

#: ``(version, digest)`` of a write; the digest is None for a delete.
Fingerprint = tuple[int, bytes | None]

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _fingerprint(op: IndexOp) -> Fingerprint | None:
    """None when the document cannot be digested (it is then always written)."""
    if op.doc is None:
        return op.version, None
    try:
        data = _CANONICAL.encode(op.doc).encode("utf-8")
    except (TypeError, ValueError):  # not JSON, or text with a lone surrogate
        return None
    return op.version, hashlib.blake2b(data, digest_size=16).digest()


class WrittenDocuments:
    """The fingerprints of up to ``capacity`` recently written documents (least recent dropped)."""

    def __init__(self, capacity: int = 20_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.skipped = 0  # writes dropped as identical to the last one, since start
        self._last: OrderedDict[str, Fingerprint] = OrderedDict()

    def __len__(self) -> int:
        return len(self._last)

    def new_writes(self, ops: Sequence[IndexOp]) -> tuple[list[IndexOp], list[tuple[str, Fingerprint]]]:
        """The ops that differ from the last write of their document, and the fingerprints to
        ``record`` once the index has taken them."""
        send: list[IndexOp] = []
        fingerprints: list[tuple[str, Fingerprint]] = []
        for op in ops:
            fp = _fingerprint(op)
            if fp is not None and self._last.get(op.doc_id) == fp:
                self._last.move_to_end(op.doc_id)
                self.skipped += 1
                continue
            send.append(op)
            if fp is not None:
                fingerprints.append((op.doc_id, fp))
        return send, fingerprints

    def record(self, fingerprints: Sequence[tuple[str, Fingerprint]]) -> None:
        """Remember writes the index has taken (or found older than what it holds)."""
        last = self._last
        for doc_id, fp in fingerprints:
            last[doc_id] = fp
            last.move_to_end(doc_id)
        while len(last) > self.capacity:
            last.popitem(last=False)

    def forget(self) -> None:
        """Drop every fingerprint (after a rebalance, another worker may have written since)."""
        self._last.clear()
