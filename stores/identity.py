"""Store identity: which store an index was built from, so that a repair from another refuses.

A repair compares an index with the documents its store gives and deletes what the store has no
partition for. Pointed at another store (an empty one, a fresh one, another deployment's of the
same app) it would delete the index. So a store carries an identity and an index records the
identity of the store it was built from:

- the store: one row of the framework table ``converge_store_identity`` (partition ``scope`` =
  ``store``; cells ``store_id``, a random id, ``app`` and ``created_at``), written once, by the
  first writer that builds an index from it (a worker when it starts, ``converge spark
  reindex``), at write time 1: two first writers racing end on the same row (the larger id wins
  the tie), and no later write ever replaces it. Reading it creates nothing;
- the index: the ``_meta`` of each concrete index's mappings, ``{"converge": {"source":
  {"store_id", "app", "store", "paired_at"}}}`` (``store``: the store's URL without credentials),
  given when the index is created and added to an index that records none (one made before
  identities existed) by the worker when it starts. ``converge spark reindex`` builds a new
  generation from its store and records that store: the one way to re-pair an index.

``pairing_problem`` says why a repair must refuse: the store records no identity while the
index records a source (an empty or new store), or the two differ (another store). An index
that records no source (made before identities existed, by hand, or by a job that does not
record one) pairs with any store: a repair then stands only on the delete bound
(``framework.core.repair_guard``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from framework.core.mutations import CellValue, Upsert
from framework.core.repair_guard import RepairRefused
from framework.core.schema import Column, SchemaError, TableSchema
from stores.base import SearchIndex, WideColumnStore

__all__ = [
    "IDENTITY_TABLE",
    "StoreIdentity",
    "IndexSource",
    "StoreMismatch",
    "read_store_identity",
    "ensure_store_identity",
    "source_of",
    "with_source",
    "index_sources",
    "record_source",
    "pair_index",
    "pairing_problem",
    "require_pairing",
    "public_url",
]

log = logging.getLogger(__name__)

IDENTITY_TABLE = TableSchema(
    "converge_store_identity",
    partition_key=(Column("scope", "text"),),
    columns=(Column("store_id", "text"), Column("app", "text"), Column("created_at", "bigint")),
)
_KEY = {"scope": "store"}
#: The write time of the identity row: below any real write, so nothing ever ties with it but
#: another first write of it.
_VERSION = 1


class StoreMismatch(RepairRefused):
    """A repair pointed at a store that is not the source of its index."""


@dataclass(frozen=True)
class StoreIdentity:
    """A store's identity: its random id, the app that first wrote it, when (epoch µs)."""

    store_id: str
    app: str
    created_at: int

    def describe(self) -> str:
        at = datetime.fromtimestamp(self.created_at / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"store {self.store_id} (app {self.app}, created {at})"


@dataclass(frozen=True)
class IndexSource:
    """The store a concrete index records it was built from."""

    store_id: str
    app: str = ""
    store: str = ""
    paired_at: int = 0

    def describe(self) -> str:
        where = f" at {self.store}" if self.store else ""
        return f"store {self.store_id} (app {self.app}){where}"

    def to_meta(self) -> dict[str, Any]:
        return {"converge": {"source": {"store_id": self.store_id, "app": self.app, "store": self.store,
                                        "paired_at": self.paired_at}}}  # fmt: skip

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any] | None) -> IndexSource | None:
        source = ((meta or {}).get("converge") or {}).get("source")
        if not isinstance(source, Mapping) or not source.get("store_id"):
            return None
        return cls(str(source["store_id"]), str(source.get("app") or ""), str(source.get("store") or ""),
                   int(source.get("paired_at") or 0))  # fmt: skip


def public_url(url: str) -> str:
    """``url`` without user name or password (it is recorded in the index and printed)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _has_table(store: WideColumnStore) -> bool:
    try:
        store.schema(IDENTITY_TABLE.name)
    except SchemaError:
        return False
    return True


async def read_store_identity(store: WideColumnStore) -> StoreIdentity | None:
    """The identity ``store`` records; None when it has none (nothing is created)."""
    if not _has_table(store):
        return None
    row = await store.read_row(IDENTITY_TABLE.name, _KEY)
    if row is None:
        return None
    cells = row.values()
    if not cells.get("store_id"):
        return None
    return StoreIdentity(
        str(cells["store_id"]), str(cells.get("app") or ""), int(cells.get("created_at") or 0)
    )


async def ensure_store_identity(
    store: WideColumnStore, app: str, *, clock: Callable[[], float] = time.time
) -> StoreIdentity:
    """The identity of ``store``, written first when it has none (by ``app``)."""
    found = await read_store_identity(store)
    if found is not None:
        return found
    await store.ensure_table(IDENTITY_TABLE)
    cells: dict[str, CellValue] = {
        "store_id": uuid.uuid4().hex,
        "app": app,
        "created_at": int(clock() * 1_000_000),
    }
    await store.apply([Upsert(IDENTITY_TABLE.name, dict(_KEY), cells, _VERSION)])
    made = await read_store_identity(store)  # a racing first writer's may have won the tie
    assert made is not None
    log.info("store identity: %s", made.describe())
    return made


def source_of(
    identity: StoreIdentity, store_url: str, *, clock: Callable[[], float] = time.time
) -> IndexSource:
    """What an index built from the store ``identity`` (at ``store_url``) records."""
    return IndexSource(identity.store_id, identity.app, public_url(store_url), int(clock() * 1_000_000))


def with_source(mappings: Mapping[str, Any] | None, source: IndexSource) -> dict[str, Any]:
    """``mappings`` with ``_meta`` recording ``source`` (for an index about to be created)."""
    out = dict(mappings or {})
    meta = dict(out.get("_meta") or {})
    meta.update(source.to_meta())
    out["_meta"] = meta
    return out


def _client(index: SearchIndex) -> Any:
    """The Elasticsearch client of ``index``; None for an index that keeps no mappings' metadata
    (the test kit's memory index, an aggregate's contributions)."""
    client = getattr(index, "client", None)
    return client if client is not None and hasattr(client, "indices") else None


async def index_sources(index: SearchIndex, target: str) -> dict[str, IndexSource | None]:
    """The source each concrete index behind ``target`` (an alias or an index) records; empty
    when ``target`` does not exist or the index keeps no metadata."""
    client = _client(index)
    if client is None:
        return {}
    from elasticsearch import ApiError, NotFoundError, TransportError

    from stores.elasticsearch.error_map import map_error

    try:
        body = (await client.indices.get_mapping(index=target)).body
    except NotFoundError:
        return {}
    except (ApiError, TransportError) as exc:
        raise map_error(exc, f"get mapping {target}") from exc
    return {name: IndexSource.from_meta((entry.get("mappings") or {}).get("_meta"))
            for name, entry in sorted(body.items())}  # fmt: skip


async def record_source(index: SearchIndex, target: str, source: IndexSource) -> list[str]:
    """Record ``source`` in every concrete index behind ``target``; the indices written."""
    client = _client(index)
    if client is None:
        return []
    from elasticsearch import ApiError, TransportError

    from stores.elasticsearch.error_map import map_error

    names = sorted(await index_sources(index, target))
    for name in names:
        try:
            body = (await client.indices.get_mapping(index=name)).body
            meta = dict(((body.get(name) or {}).get("mappings") or {}).get("_meta") or {})
            meta.update(source.to_meta())
            await client.indices.put_mapping(index=name, meta=meta)
        except (ApiError, TransportError) as exc:
            raise map_error(exc, f"record the source of {name}") from exc
    return names


async def pair_index(index: SearchIndex, alias: str, identity: StoreIdentity, store_url: str) -> None:
    """A writer's pairing of ``alias`` with its store: the store recorded on every concrete
    index that records none; an index built from another store is logged at warning (its
    repairs from this store will refuse) and left as it is."""
    for name, source in (await index_sources(index, alias)).items():
        if source is None:
            await record_source(index, name, source_of(identity, store_url))
        elif source.store_id != identity.store_id:
            log.warning("index %s was built from %s, not from this %s at %s: a repair from this store "
                        "refuses (rebuild it with converge spark reindex)", name, source.describe(),
                        identity.describe(), public_url(store_url))  # fmt: skip


def pairing_problem(
    identity: StoreIdentity | None, sources: Mapping[str, IndexSource | None], store_url: str, alias: str
) -> str | None:
    """Why a repair of ``alias`` (whose concrete indices record ``sources``) from the store at
    ``store_url`` (``identity``) must refuse; None when it may run."""
    for name, source in sources.items():
        if source is None or (identity is not None and source.store_id == identity.store_id):
            continue
        what = (
            "it records no store identity (an empty or new store)"
            if identity is None
            else f"it is {identity.describe()}"
        )
        return (
            f"store {public_url(store_url)} was not the source of index {alias} ({name}): {what}, the index "
            f"was built from {source.describe()}; point the command at that store (--wide-store, "
            f"--data-dir), or rebuild the index from this one with converge spark reindex"
        )
    return None


async def require_pairing(store: WideColumnStore, index: SearchIndex, alias: str, store_url: str) -> None:
    """StoreMismatch (one line) when ``store`` is not the source of the index behind ``alias``."""
    problem = pairing_problem(await read_store_identity(store), await index_sources(index, alias),
                              store_url, alias)  # fmt: skip
    if problem is not None:
        raise StoreMismatch(problem)
