"""Open a wide-column store from a URL: ``sqlite:///path`` or ``cassandra://hosts/keyspace``."""

from __future__ import annotations

from stores.base import WideColumnStore

__all__ = ["open_wide_store"]


async def open_wide_store(url: str) -> WideColumnStore:
    """The store named by ``url``; ValueError for an unknown scheme."""
    if url.startswith("sqlite://"):
        from stores.sqlite import SqliteStore

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
