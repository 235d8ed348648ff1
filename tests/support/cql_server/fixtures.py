"""Pytest fixtures: one CQL test server and one driver session per test session.

Import them into a test module or a conftest (``from tests.support.cql_server.fixtures
import cql_server, cql_session``). ``connect_cluster`` builds a ``Cluster`` the way the
tests use it: protocol v4 pinned, loopback contact point, the server's port.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from tests.support.cql_server.server import CqlServer

__all__ = ["KEYSPACE", "connect_cluster", "cql_server", "cql_session"]

#: The keyspace the ``cql_session`` fixture creates for tests.
KEYSPACE = "converge_test"


def connect_cluster(port: int, host: str = "127.0.0.1", **options: Any) -> Cluster:
    """A driver Cluster for the server at ``host:port`` (protocol v4, token-aware, its one datacenter)."""
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc="datacenter1")),
        request_timeout=options.pop("request_timeout", 10.0),
    )
    return Cluster(
        contact_points=[host],
        port=port,
        protocol_version=4,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        **options,
    )


@pytest.fixture(scope="session")
def cql_server() -> Iterator[CqlServer]:
    """A running CQL test server; its clock is reset to real time after each user that swaps it."""
    server = CqlServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cql_session(cql_server: CqlServer) -> Iterator[Any]:
    """A connected driver Session (no keyspace bound) after ``CREATE KEYSPACE converge_test``."""
    cluster = connect_cluster(cql_server.port)
    session = cluster.connect()
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} "
        "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    try:
        yield session
    finally:
        cluster.shutdown()
        cql_server.clock = time.time
