"""A CQL native-protocol (v4) test server for the Cassandra adapter: a protocol test double, not Cassandra.

See README.md in this directory. ``CqlServer().start()`` serves on a free
loopback port; ``tests.support.cql_server.fixtures`` has pytest fixtures.
"""

from tests.support.cql_server.server import CqlServer

__all__ = ["CqlServer"]
