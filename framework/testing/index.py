"""``MemoryIndex``: an in-memory ``SearchIndex`` with Elasticsearch's ``external_gte`` rules.

A fake of the index contract in ``stores.base`` for tests without a server:

- a write (index or delete) is kept when its version is at least the stored
  one, else it is rejected as stale (``False``, bulk outcome ``stale``/409);
- a delete keeps a versioned tombstone forever (like the adapter's
  ``tombstones="document"`` mode; Elasticsearch's native tombstones expire
  after ``gc_deletes``), so an older write stays rejected; deleting a
  missing document succeeds and leaves the tombstone;
- documents are checked and encoded as the Elasticsearch adapter does
  (names, ids, versions, JSON) and stored decoded, so a tuple reads back
  as a list;
- ``ensure_index`` creates ``{alias}-v{generation}`` and points an unset
  alias at it; writes to an alias need it to exist and point at one index;
  a concrete ``…-vN`` target is created on first write, as Elasticsearch
  auto-creates it;
- ``get`` is real-time; ``search`` and ``scan`` see the writes made visible
  by the last ``refresh`` of the index;
- ``search`` understands only ``match_all`` (or no query) and raises
  ``NotImplementedError`` for any other query; hits come in doc id order.
"""

from __future__ import annotations

import copy
import json
import re
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stores.base import BulkItem, BulkResult, IndexOp, SearchHit, SearchIndex
from stores.elasticsearch.checks import (
    DEFAULT_MAX_DOC_BYTES,
    DocumentError,
    check_doc_id,
    check_doc_version,
    check_name,
    encode_document,
)
from stores.errors import PermanentStoreError, StoreError

__all__ = ["MemoryIndex"]

_GENERATION = re.compile(r"-v[0-9]+$")
_MAX_SEARCH_SIZE = 10_000


@dataclass
class _Index:
    mappings: dict[str, Any]
    #: doc_id -> (version, source or None for a tombstone)
    live: dict[str, tuple[int, dict[str, Any] | None]] = field(default_factory=dict)
    visible: dict[str, tuple[int, dict[str, Any] | None]] = field(default_factory=dict)


class MemoryIndex(SearchIndex):
    """An in-memory ``SearchIndex`` (see the module docstring for what it models)."""

    def __init__(self, max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES) -> None:
        self.max_doc_bytes = max_doc_bytes
        self._indices: dict[str, _Index] = {}
        self._aliases: dict[str, list[str]] = {}
        self._closed = False

    # -- indices and aliases -----------------------------------------------
    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        self._check_open()
        check_name(alias)
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise DocumentError("generation", f"must be a positive integer, got {generation!r}")
        name = check_name(f"{alias}-v{generation}", "index")
        self._indices.setdefault(name, _Index(dict(mappings or {})))
        if alias not in self._aliases:
            self._aliases[alias] = [name]
        return name

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        self._check_open()
        check_name(alias)
        check_name(new_index, "new_index")
        if new_index not in self._indices:
            raise PermanentStoreError(f"swap alias {alias} -> {new_index}: HTTP 404 no such index")
        left = [i for i in self._aliases.get(alias, []) if i != new_index]
        self._aliases[alias] = [new_index]
        return left

    def alias_indices(self, alias: str) -> list[str]:
        """The concrete indices ``alias`` points at (empty when it does not exist)."""
        return sorted(self._aliases.get(alias, []))

    def _target(self, name: str, *, create: bool = False) -> _Index:
        """The one concrete index a write or get addresses."""
        if _GENERATION.search(name):
            if name not in self._indices and create:
                self._indices[name] = _Index({})
            if name in self._indices:
                return self._indices[name]
            raise PermanentStoreError(f"{name}: HTTP 404 index_not_found_exception")
        indices = self._aliases.get(name)
        if not indices:
            raise PermanentStoreError(f"{name}: HTTP 404 no alias {name!r} (call ensure_index first)")
        if len(indices) != 1:
            raise PermanentStoreError(f"{name}: HTTP 400 alias points at {len(indices)} indices")
        return self._indices[indices[0]]

    def _readable(self, name: str) -> list[_Index]:
        if name in self._indices:
            return [self._indices[name]]
        if name in self._aliases:
            return [self._indices[i] for i in self._aliases[name]]
        raise PermanentStoreError(f"{name}: HTTP 404 index_not_found_exception")

    # -- writes -------------------------------------------------------------
    def _write(self, index: _Index, doc_id: str, version: int, source: dict[str, Any] | None) -> bool:
        stored = index.live.get(doc_id)
        if stored is not None and version < stored[0]:
            return False
        index.live[doc_id] = (version, source)
        return True

    def _encoded(self, doc: object) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(encode_document(doc, self.max_doc_bytes))
        return decoded

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        self._check_open()
        check_name(alias)
        check_doc_id(doc_id)
        check_doc_version(version)
        source = self._encoded(doc)
        return self._write(self._target(alias, create=True), doc_id, version, source)

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        self._check_open()
        check_name(alias)
        check_doc_id(doc_id)
        check_doc_version(version)
        return self._write(self._target(alias, create=True), doc_id, version, None)

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        self._check_open()
        check_name(alias)
        target = self._target(alias, create=True)
        items: list[BulkItem] = []
        for op in ops:
            doc_id = str(getattr(op, "doc_id", ""))
            try:
                if not isinstance(op, IndexOp):
                    raise DocumentError("op", f"must be an IndexOp, got {type(op).__name__}")
                check_doc_id(op.doc_id)
                check_doc_version(op.version)
                source = None if op.doc is None else self._encoded(op.doc)
            except DocumentError as exc:
                items.append(BulkItem(doc_id, "error", 400, reason=str(exc)))
                continue
            if self._write(target, op.doc_id, op.version, source):
                items.append(BulkItem(op.doc_id, "ok", 200 if op.doc is None else 201))
            else:
                items.append(BulkItem(op.doc_id, "stale", 409, reason="version_conflict_engine_exception"))
        return BulkResult(items)

    # -- reads ----------------------------------------------------------------
    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        self._check_open()
        check_name(alias)
        check_doc_id(doc_id)
        stored = self._target(alias).live.get(doc_id)
        if stored is None or stored[1] is None:
            return None
        return SearchHit(doc_id, stored[0], copy.deepcopy(stored[1]))

    def _hits(self, alias: str) -> list[SearchHit]:
        hits = [
            SearchHit(doc_id, version, copy.deepcopy(source))
            for index in self._readable(alias)
            for doc_id, (version, source) in index.visible.items()
            if source is not None
        ]
        return sorted(hits, key=lambda h: h.doc_id)

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        """Refreshed documents in doc id order; only ``match_all`` queries are supported."""
        self._check_open()
        check_name(alias)
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= _MAX_SEARCH_SIZE:
            raise DocumentError("size", f"must be an integer in [0, {_MAX_SEARCH_SIZE}], got {size!r}")
        if query is not None and dict(query) != {"match_all": {}}:
            raise NotImplementedError(f"MemoryIndex.search supports only match_all, got {dict(query)!r}")
        return self._hits(alias)[:size]

    async def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        """Refreshed documents of one slice (slices split by CRC-32 of the doc id)."""
        self._check_open()
        check_name(alias)
        if slices < 1 or not 0 <= slice_id < slices or page_size < 1:
            raise DocumentError("slice", f"bad slice {slice_id}/{slices} or page_size {page_size}")
        for hit in self._hits(alias):
            if _slice_of(hit.doc_id, slices) == slice_id:
                yield hit

    async def refresh(self, alias: str) -> None:
        self._check_open()
        check_name(alias)
        for index in self._readable(alias):
            index.visible = dict(index.live)

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the memory index is closed")


def _slice_of(doc_id: str, slices: int) -> int:
    return zlib.crc32(doc_id.encode("utf-8")) % slices
