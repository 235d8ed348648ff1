"""The embedded wide-column store: SQLite with Cassandra's cell rules."""

from stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
