"""The search index on Elasticsearch: whole documents under external versions, behind aliases.

Every write carries ``version_type=external_gte``: Elasticsearch keeps a
document only when its version is at least the stored one, so replays,
duplicates and reordering converge on the highest version. A 409 conflict
means the index already holds something newer and is reported as ``False``
(single writes) or ``stale`` (bulk items), a success for the caller.

Health: :meth:`answers` sends ``HEAD /`` with a short timeout and says whether the
cluster answered; it never raises (the runtime probes with it during an outage).

Errors of a whole request: connection failures, timeouts, 408, 429 and 5xx
raise :class:`TransientStoreError`; any other 4xx raises
:class:`PermanentStoreError`. Bad input raises :class:`DocumentError` before
any request. Bulk item errors are returned, never raised.

Deletes and tombstones. With ``tombstones="native"`` (default) a delete is an
Elasticsearch delete at the given version; Elasticsearch keeps its versioned
tombstone for ``index.gc_deletes`` (60 s by default), during which an older
write is rejected. Deleting a missing document is a success (Elasticsearch
answers 404 ``not_found`` and still records the tombstone). With
``tombstones="document"`` a delete indexes a marker document
``{"converge_tombstone": true}`` at the version instead: it never expires,
works on servers that keep no delete tombstones (noida-db), and is hidden
from :meth:`get` and :meth:`search`; the marker field is added to the
mappings of indices created by :meth:`ensure_index`.

:meth:`remove` deletes one copy of a document with no tombstone at its version, in either
mode: a plain (internally versioned) delete conditional on the copy's sequence number. A later
write at any external version is then accepted: at once on noida-db, which keeps no delete
tombstones; on Elasticsearch after ``index.gc_deletes``, during which its delete tombstone (the
copy's version plus one) refuses lower ones. The verifier removes a document the store gives
none for that way, since a tombstone at its version would refuse the real document later.

Targets. A target named like a generation (``…-v<N>``) is written as a
concrete index; any other target must be an existing alias
(``require_alias``), so a write before :meth:`ensure_index` fails instead of
auto-creating an index that would shadow the alias name. Equal versions are
accepted (``external_gte``), so callers give different contents different
versions; a delete and an index write at the same version end in whichever
arrived last.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from elasticsearch import ApiError, AsyncElasticsearch, ConflictError, NotFoundError, TransportError

from stores.base import BulkItem, BulkResult, IndexOp, SearchHit, SearchIndex
from stores.elasticsearch.checks import (
    DEFAULT_MAX_DOC_BYTES,
    DocumentError,
    check_doc_id,
    check_doc_version,
    check_name,
    encode_document,
)
from stores.elasticsearch.error_map import bulk_item, error_summary, map_error
from stores.elasticsearch.url import parse_url
from stores.errors import PermanentStoreError, TransientStoreError

__all__ = ["ElasticsearchIndex", "DocumentError", "TOMBSTONE_FIELD"]

#: The marker field of tombstone documents (``tombstones="document"``).
TOMBSTONE_FIELD = "converge_tombstone"
_TOMBSTONE_BODY = b'{"' + TOMBSTONE_FIELD.encode() + b'":true}'
_GENERATION = re.compile(r"-v[0-9]+$")
_VERSION_TYPE = "external_gte"
_VERSIONING = {"version_type": _VERSION_TYPE}
_MAX_SEARCH_SIZE = 10_000
_SWAP_ATTEMPTS = 3

Tombstones = Literal["native", "document"]


class ElasticsearchIndex(SearchIndex):
    """A :class:`SearchIndex` over ``elasticsearch.AsyncElasticsearch``.

    Pass ``hosts`` (a URL or list of URLs) or an existing ``client``; a given
    client is not closed by :meth:`close`. ``max_retries`` defaults to 0
    because the runtime owns retries and back-off. ``index_settings`` go to
    every index :meth:`ensure_index` creates (e.g. ``{"gc_deletes": "1h"}``
    to keep native delete tombstones longer).
    """

    def __init__(
        self,
        hosts: str | Sequence[str] | None = None,
        *,
        client: AsyncElasticsearch | None = None,
        request_timeout: float = 10.0,
        max_retries: int = 0,
        max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES,
        tombstones: Tombstones = "native",
        index_settings: Mapping[str, Any] | None = None,
    ) -> None:
        if (hosts is None) == (client is None):
            raise ValueError("pass exactly one of hosts or client")
        if tombstones not in ("native", "document"):
            raise ValueError(f"tombstones must be 'native' or 'document', got {tombstones!r}")
        if request_timeout <= 0 or max_doc_bytes <= 0 or max_retries < 0:
            raise ValueError("request_timeout and max_doc_bytes must be positive, max_retries >= 0")
        self._owns_client = client is None
        base = client if client is not None else AsyncElasticsearch(hosts)
        self._base = base
        self._es = base.options(request_timeout=request_timeout, max_retries=max_retries)
        self.max_doc_bytes = max_doc_bytes
        self.tombstones: Tombstones = tombstones
        self._reserved = frozenset({TOMBSTONE_FIELD}) if tombstones == "document" else frozenset()
        self.index_settings = dict(index_settings) if index_settings else None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> ElasticsearchIndex:
        """An index on the cluster at ``url`` (e.g. ``StackInfo.es_url``); the URL's options
        (``stores.elasticsearch.url``) override ``kwargs``."""
        hosts, options = parse_url(url)
        return cls(hosts, **{**kwargs, **options})

    @property
    def client(self) -> AsyncElasticsearch:
        """The underlying client (with this adapter's timeout and retry options)."""
        return self._es

    async def answers(self, timeout: float = 1.0) -> bool:
        """True when the cluster answers a ``HEAD /`` within ``timeout`` s (never raises): the
        cheap health probe the runtime sends while the index is down."""
        try:
            return bool(await self._base.options(request_timeout=timeout, max_retries=0).ping())
        except Exception:  # noqa: BLE001 - whatever fails, the cluster did not answer
            return False

    # -- indices and aliases -----------------------------------------------
    async def ensure_index(
        self, alias: str, mappings: Mapping[str, Any] | None = None, generation: int = 1
    ) -> str:
        """Create ``{alias}-v{generation}`` if missing, point ``alias`` at it when unset.

        An existing index keeps its mappings (in ``document`` mode the marker
        field is added); an existing alias is not moved (use :meth:`swap_alias`).
        Two concurrent first calls with different generations may both add the
        alias; create generations from one place. Returns the concrete index name.
        """
        check_name(alias)
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise DocumentError("generation", f"must be a positive integer, got {generation!r}")
        if mappings is not None and not isinstance(mappings, Mapping):
            raise DocumentError("mappings", f"must be a mapping, got {type(mappings).__name__}")
        name = check_name(f"{alias}-v{generation}", "index")
        try:
            if not await self._es.indices.exists(index=name):
                try:
                    await self._es.indices.create(
                        index=name, mappings=self._mappings(mappings), settings=self.index_settings
                    )
                except ApiError as exc:
                    if not error_summary(exc.body).startswith("resource_already_exists_exception"):
                        raise
            elif self.tombstones == "document":  # an index made elsewhere needs the marker field
                await self._es.indices.put_mapping(index=name, properties=self._mappings(None)["properties"])
            if not await self._es.indices.exists_alias(name=alias):
                await self._es.indices.update_aliases(actions=[{"add": {"index": name, "alias": alias}}])
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"ensure_index {name}") from exc
        return name

    def _mappings(self, mappings: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(mappings or {})
        if self.tombstones == "document":
            props = dict(out.get("properties") or {})
            props.setdefault(TOMBSTONE_FIELD, {"type": "boolean"})
            out["properties"] = props
        return out

    async def alias_indices(self, alias: str) -> list[str]:
        """The concrete indices ``alias`` points at (empty when it does not exist)."""
        check_name(alias)
        try:
            resp = await self._es.indices.get_alias(name=alias)
        except NotFoundError:
            return []
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"get alias {alias}") from exc
        return sorted(resp.body)

    async def swap_alias(self, alias: str, new_index: str) -> list[str]:
        """Point ``alias`` at ``new_index`` in one ``_aliases`` request; return the indices it left.

        The removals use ``must_exist``, so a concurrent move makes the request
        fail as a whole; it is then re-read and retried (a few times).
        """
        check_name(alias)
        check_name(new_index, "new_index")
        for attempt in range(_SWAP_ATTEMPTS):
            current = await self.alias_indices(alias)
            if current == [new_index]:
                return []
            left = [i for i in current if i != new_index]
            actions: list[dict[str, Any]] = [
                {"remove": {"index": i, "alias": alias, "must_exist": True}} for i in left
            ]
            actions.append({"add": {"index": new_index, "alias": alias}})
            try:
                await self._es.indices.update_aliases(actions=actions)
                return left
            except (ApiError, TransportError) as exc:
                lost_race = isinstance(exc, NotFoundError) and "aliases_not_found" in error_summary(exc.body)
                if not lost_race or attempt == _SWAP_ATTEMPTS - 1:
                    raise map_error(exc, f"swap alias {alias} -> {new_index}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- writes -------------------------------------------------------------
    def _require_alias(self, target: str) -> bool:
        return _GENERATION.search(target) is None

    async def index(self, alias: str, doc_id: str, doc: Mapping[str, Any], version: int) -> bool:
        """Write the whole document at ``version``; False when the index already holds newer."""
        check_name(alias)
        check_doc_id(doc_id)
        check_doc_version(version)
        body = encode_document(doc, self.max_doc_bytes, self._reserved)
        return await self._put(alias, doc_id, body, version)

    async def _put(self, alias: str, doc_id: str, body: bytes, version: int) -> bool:
        try:
            await self._es.index(
                index=alias, id=doc_id, document=body,  # type: ignore[arg-type] # pre-encoded JSON
                version=version, require_alias=self._require_alias(alias), version_type=_VERSION_TYPE,
            )  # fmt: skip
        except ConflictError:
            return False
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"index {alias}/{doc_id}") from exc
        return True

    async def delete(self, alias: str, doc_id: str, version: int) -> bool:
        """Delete at ``version``; False when the index already holds newer.

        Deleting a document that does not exist succeeds (and leaves the tombstone).
        """
        check_name(alias)
        check_doc_id(doc_id)
        check_doc_version(version)
        if self.tombstones == "document":
            return await self._put(alias, doc_id, _TOMBSTONE_BODY, version)
        try:
            await self._es.delete(index=alias, id=doc_id, version=version, version_type=_VERSION_TYPE)
        except ConflictError:
            return False
        except NotFoundError as exc:
            if isinstance(exc.body, Mapping) and exc.body.get("result") == "not_found":
                return True
            raise map_error(exc, f"delete {alias}/{doc_id}") from exc
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"delete {alias}/{doc_id}") from exc
        return True

    async def remove(self, alias: str, doc_id: str, version: int) -> bool:
        """Delete the document if the index holds it at ``version``, leaving no tombstone at that
        version (see the module docstring); False when it holds another version or none."""
        check_name(alias)
        check_doc_id(doc_id)
        try:
            body = (await self._es.get(index=alias, id=doc_id)).body
        except NotFoundError:
            return False
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"get {alias}/{doc_id}") from exc
        source = body.get("_source") or {}
        if not body.get("found") or body.get("_version") != version or not self._visible(source):
            return False
        try:
            await self._es.delete(index=body["_index"], id=doc_id, if_seq_no=body["_seq_no"],
                                  if_primary_term=body["_primary_term"])  # fmt: skip
        except (ConflictError, NotFoundError):
            return False
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"remove {alias}/{doc_id}") from exc
        return True

    async def bulk(self, alias: str, ops: Sequence[IndexOp]) -> BulkResult:
        """Apply ``ops`` in one ``_bulk`` request; one outcome per op, in order.

        An op that fails validation is not sent and comes back as a permanent
        error with status 400. Raises only for whole-request failures.
        """
        check_name(alias)
        items: list[BulkItem | None] = []
        lines: list[Any] = []
        sent: list[tuple[int, str, str]] = []  # (position, doc_id, op_type)
        require_alias = self._require_alias(alias)
        for pos, op in enumerate(ops):
            try:
                if not isinstance(op, IndexOp):
                    raise DocumentError("op", f"must be an IndexOp, got {type(op).__name__}")
                action, body = self._bulk_lines(alias, op)
            except DocumentError as exc:
                items.append(BulkItem(str(getattr(op, "doc_id", "")), "error", 400, reason=str(exc)))
                continue
            items.append(None)
            op_type = next(iter(action))
            sent.append((pos, op.doc_id, op_type))
            lines.append(action)
            if body is not None:
                lines.append(body)
        if sent:
            try:
                resp = await self._es.bulk(operations=lines, require_alias=require_alias or None)
            except (ApiError, TransportError) as exc:
                raise map_error(exc, f"bulk {alias} ({len(sent)} items)") from exc
            answers = resp.body.get("items", [])
            if len(answers) != len(sent):
                raise PermanentStoreError(f"bulk {alias}: {len(answers)} answers for {len(sent)} items")
            for (pos, doc_id, op_type), answer in zip(sent, answers, strict=True):
                items[pos] = bulk_item(doc_id, op_type, answer.get(op_type) or next(iter(answer.values())))
        return BulkResult([i for i in items if i is not None])

    def _bulk_lines(self, alias: str, op: IndexOp) -> tuple[dict[str, Any], bytes | None]:
        check_doc_id(op.doc_id)
        check_doc_version(op.version)
        meta: dict[str, Any] = {"_index": alias, "_id": op.doc_id, "version": op.version, **_VERSIONING}
        if op.doc is None and self.tombstones == "native":
            return {"delete": meta}, None
        body = (
            _TOMBSTONE_BODY if op.doc is None else encode_document(op.doc, self.max_doc_bytes, self._reserved)
        )
        return {"index": meta}, body

    # -- reads ----------------------------------------------------------------
    def _visible(self, source: Mapping[str, Any]) -> bool:
        return not (self.tombstones == "document" and source.get(TOMBSTONE_FIELD) is True)

    async def get(self, alias: str, doc_id: str) -> SearchHit | None:
        """The stored document and its version (real-time, no refresh needed), or None."""
        check_name(alias)
        check_doc_id(doc_id)
        try:
            resp = await self._es.get(index=alias, id=doc_id)
        except NotFoundError as exc:
            if isinstance(exc.body, Mapping) and exc.body.get("found") is False:
                return None
            raise map_error(exc, f"get {alias}/{doc_id}") from exc
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"get {alias}/{doc_id}") from exc
        body = resp.body
        source = body.get("_source") or {}
        if not body.get("found") or not self._visible(source):
            return None
        return SearchHit(body["_id"], body.get("_version"), source)

    async def get_many(self, alias: str, doc_ids: Sequence[str]) -> list[SearchHit | None]:
        """``get`` of each id, in order, by one ``_mget`` request (real-time as ``get``)."""
        check_name(alias)
        ids = [check_doc_id(doc_id) for doc_id in doc_ids]
        if not ids:
            return []
        try:
            resp = await self._es.mget(index=alias, ids=ids)
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"mget {alias} ({len(ids)} ids)") from exc
        out: list[SearchHit | None] = []
        for doc in resp.body["docs"]:
            if "error" in doc:
                # a shard that did not answer for this id: the whole read is tried again later
                raise TransientStoreError(f"mget {alias}/{doc.get('_id')}: {doc['error']}")
            source = doc.get("_source") or {}
            found = doc.get("found") and self._visible(source)
            out.append(SearchHit(doc["_id"], doc.get("_version"), source) if found else None)
        return out

    async def search(
        self, alias: str, query: Mapping[str, Any] | None = None, size: int = 10
    ) -> list[SearchHit]:
        """Documents matching the query DSL ``query`` (match_all when None), with versions.

        Only writes made visible by a refresh are searched (see :meth:`refresh`).
        """
        check_name(alias)
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= _MAX_SEARCH_SIZE:
            raise DocumentError("size", f"must be an integer in [0, {_MAX_SEARCH_SIZE}], got {size!r}")
        if query is not None and not isinstance(query, Mapping):
            raise DocumentError("query", f"must be a mapping, got {type(query).__name__}")
        q: dict[str, Any] = dict(query) if query is not None else {"match_all": {}}
        if self.tombstones == "document":
            q = {"bool": {"must": [q], "must_not": [{"term": {TOMBSTONE_FIELD: True}}]}}
        try:
            resp = await self._es.search(index=alias, query=q, size=size, version=True)
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"search {alias}") from exc
        return [
            SearchHit(h["_id"], h.get("_version"), h.get("_source") or {})
            for h in resp.body["hits"]["hits"]
            if self._visible(h.get("_source") or {})
        ]

    async def scan(
        self, alias: str, *, slice_id: int = 0, slices: int = 1, page_size: int = 1000
    ) -> AsyncIterator[SearchHit]:
        """Every visible document in slice ``slice_id`` of ``slices``, from one point in time.

        Uses a point-in-time with ``search_after`` on ``_shard_doc``, so the
        pages are consistent and the slices partition the index.
        """
        check_name(alias)
        if slices < 1 or not 0 <= slice_id < slices or page_size < 1:
            raise DocumentError("slice", f"bad slice {slice_id}/{slices} or page_size {page_size}")
        try:
            pit = (await self._es.open_point_in_time(index=alias, keep_alive="2m")).body["id"]
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"open point in time on {alias}") from exc
        after: list[Any] | None = None
        try:
            while True:
                body: dict[str, Any] = {"size": page_size, "pit": {"id": pit, "keep_alive": "2m"},
                                        "sort": ["_shard_doc"], "version": True}  # fmt: skip
                if slices > 1:
                    body["slice"] = {"id": slice_id, "max": slices}
                if after is not None:
                    body["search_after"] = after
                try:
                    resp = await self._es.search(body=body)
                except (ApiError, TransportError) as exc:
                    raise map_error(exc, f"scan {alias}") from exc
                hits = resp.body["hits"]["hits"]
                if not hits:
                    return
                pit = resp.body.get("pit_id", pit)
                for h in hits:
                    source = h.get("_source") or {}
                    if self._visible(source):
                        yield SearchHit(h["_id"], h.get("_version"), source)
                after = hits[-1]["sort"]
        finally:
            with contextlib.suppress(ApiError, TransportError):
                await self._es.close_point_in_time(id=pit)

    async def refresh(self, alias: str) -> None:
        """Make recent writes visible to search (noida-db never refreshes an unsearched index)."""
        check_name(alias)
        try:
            await self._es.indices.refresh(index=alias)
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"refresh {alias}") from exc

    async def close(self) -> None:
        """Close the client when this adapter created it."""
        if self._owns_client:
            await self._base.close()
