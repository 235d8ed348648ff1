"""One CQL test server and one driver session for the server's own tests."""

from tests.support.cql_server.fixtures import cql_server, cql_session

__all__ = ["cql_server", "cql_session"]
