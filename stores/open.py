"""Open stores from URLs: ``sqlite:///path`` or ``cassandra://hosts/keyspace``; ``http(s)://`` indexes.

SQLite URLs follow SQLAlchemy: ``sqlite:///relative/path``, ``sqlite:////absolute/path``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from stores.base import SearchIndex, WideColumnStore

__all__ = ["open_wide_store", "open_search_index", "sqlite_beside", "sqlite_path", "sqlite_url"]


def sqlite_path(url: str) -> Path:
    """The file a SQLite URL names, by SQLAlchemy's rule: ``sqlite:///relative/path`` (relative to
    the working directory) and ``sqlite:////absolute/path``; ValueError for anything else."""
    scheme, sep, rest = url.partition("://")
    if scheme != "sqlite" or not sep or not rest.startswith("/") or not rest[1:]:
        raise ValueError(f"not a SQLite URL: {url!r} (sqlite:///relative/path or sqlite:////absolute/path)")
    return Path(rest[1:])


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The SQLite URL of ``path`` (absolute paths give ``sqlite:////...``): ``sqlite_path`` inverted."""
    text = os.fspath(path)
    if not text:
        raise ValueError("no path for a SQLite URL")
    return f"sqlite:///{text}"


def sqlite_beside(store_url: str, name: str) -> str | None:
    """The URL of a SQLite file ``name`` in the directory of a SQLite store (None for another store)."""
    if not store_url.startswith("sqlite:"):
        return None
    return sqlite_url(sqlite_path(store_url).parent / name)


async def open_wide_store(url: str, *, writer: Literal["thread", "process"] = "thread") -> WideColumnStore:
    """The store named by ``url`` (a SQLite file's directory is created); ValueError for an unknown
    scheme. ``writer``: where a SQLite store's writes run (``SqliteStore``; other stores ignore it)."""
    if url.startswith("sqlite://"):
        from stores.sqlite.store import SqliteStore

        path = sqlite_path(url)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        return await SqliteStore.open(path, writer=writer)
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
