"""The Cassandra wide-column store (cassandra-driver)."""

from stores.cassandra.store import CassandraStore

__all__ = ["CassandraStore"]
