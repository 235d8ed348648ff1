"""Open stores from URLs: ``sqlite:///path`` or ``cassandra://hosts/keyspace``; ``http(s)://`` indexes."""

from __future__ import annotations

from typing import Literal

from stores.base import SearchIndex, WideColumnStore

__all__ = ["open_wide_store", "open_search_index"]


async def open_wide_store(url: str) -> WideColumnStore:
    """The store named by ``url``; ValueError for an unknown scheme."""
    if url.startswith("sqlite://"):
        from stores.sqlite.store import SqliteStore

        # SQLAlchemy's convention: sqlite:///relative/path, sqlite:////absolute/path
        path = url.removeprefix("sqlite://").removeprefix("/")
        if not path:
            raise ValueError(f"no path in {url!r}")
        return await SqliteStore.open(path)
    if url.startswith("cassandra://"):
        from stores.cassandra.store import CassandraStore
        from stores.cassandra.url import parse_url

        return await CassandraStore.connect(**parse_url(url))
    raise ValueError(f"unknown wide-column store URL {url!r} (sqlite:///PATH or cassandra://HOST/KEYSPACE)")


def open_search_index(url: str, tombstones: Literal["native", "document"] = "native") -> SearchIndex:
    """The Elasticsearch index at ``url`` (``http://`` or ``https://``); ``tombstones`` is its
    delete mode (``document`` for an index that keeps no delete tombstones, like noida-db).

    The async client connects on first use, so open it in the loop that uses it.
    """
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"unknown search index URL {url!r} (http://HOST:PORT)")
    from stores.elasticsearch.index import ElasticsearchIndex

    return ElasticsearchIndex.from_url(url, tombstones=tombstones)
