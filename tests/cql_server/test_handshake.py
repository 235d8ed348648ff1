"""Connection set-up: OPTIONS/SUPPORTED, STARTUP/READY, REGISTER/READY, heartbeats, refusals."""

from __future__ import annotations

import struct
import time
from typing import Any

from cassandra.protocol import (
    OptionsMessage,
    ProtocolException,
    QueryMessage,
    ReadyMessage,
    RegisterMessage,
    ResultMessage,
    SupportedMessage,
)

from tests.cql_server.raw import RawConnection
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import connect_cluster


def test_options_is_answered_with_cql_version_and_compression(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        msg = conn.request(OptionsMessage(), stream=300)
        assert isinstance(msg, SupportedMessage)
        assert msg.cql_versions == ["3.4.5"]
        assert msg.options["COMPRESSION"] == [] and msg.options["PROTOCOL_VERSIONS"] == ["4/v4"]


def test_startup_and_register_are_answered_ready_on_the_request_stream(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        assert isinstance(conn.startup(), ReadyMessage)
        msg = conn.request(RegisterMessage(["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"]), stream=-7)
        assert isinstance(msg, ReadyMessage)
        rows = conn.request(QueryMessage("SELECT release_version FROM system.local", 1), stream=32767)
        assert isinstance(rows, ResultMessage) and rows.parsed_rows == [("4.0.11",)]


def test_a_query_before_startup_is_a_protocol_error(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        msg = conn.request(QueryMessage("SELECT key FROM system.local", 1))
        assert isinstance(msg, ProtocolException) and "before STARTUP" in msg.message


def test_another_protocol_version_is_refused_the_way_the_driver_downgrades_on(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        conn.send(OptionsMessage(), stream=1, version=5)
        version, _, msg = conn.receive()
        assert version == 0x84 and isinstance(msg, ProtocolException)
        assert "unsupported protocol version" in msg.message  # what the driver's downgrade looks for
        assert conn.closed_by_peer()


def test_a_response_frame_from_the_client_closes_the_connection(cql_server: CqlServer) -> None:
    with RawConnection(cql_server.port) as conn:
        conn.send_raw(struct.pack(">BBhBi", 0x84, 0, 1, 0x05, 0))
        _, _, msg = conn.receive()
        assert isinstance(msg, ProtocolException)
        assert conn.closed_by_peer()


def test_the_driver_connects_registers_and_learns_the_node(cql_server: CqlServer, cql_session: Any) -> None:
    cluster = cql_session.cluster
    host = cluster.metadata.all_hosts()[0]
    assert cluster.metadata.cluster_name == "converge-cql-test-server"
    assert (host.datacenter, host.rack, host.release_version) == ("datacenter1", "rack1", "4.0.11")
    assert cluster.metadata.token_map is not None  # Murmur3 partitioner and the node's token were read
    assert cql_server.requests["REGISTER"] >= 1 and cql_server.requests["STARTUP"] >= 2  # control + pool


def test_idle_heartbeats_are_answered_and_keep_the_connections(cql_server: CqlServer) -> None:
    cluster = connect_cluster(cql_server.port, idle_heartbeat_interval=0.2)
    try:
        session = cluster.connect()
        startups, options = cql_server.requests["STARTUP"], cql_server.requests["OPTIONS"]
        deadline = time.monotonic() + 10
        while cql_server.requests["OPTIONS"] < options + 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cql_server.requests["OPTIONS"] >= options + 4  # heartbeats on the control and pool connections
        assert session.execute("SELECT cluster_name FROM system.local").one()[0] == "converge-cql-test-server"
        assert cql_server.requests["STARTUP"] == startups  # no connection was replaced
    finally:
        cluster.shutdown()
