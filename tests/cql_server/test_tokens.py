"""The server's Murmur3 tokens equal the driver's, so token-aware routing and token scans agree."""

from __future__ import annotations

from typing import Any

from cassandra.metadata import Murmur3Token

from stores.cassandra import statements as cql
from stores.cassandra.tokens import token_of
from tests.cql_server.tables import timeline
from tests.stores.harness import hub_schema, unique
from tests.support.cql_server import CqlServer
from tests.support.cql_server.fixtures import KEYSPACE
from tests.support.cql_server.tokens import MAX_TOKEN, MIN_TOKEN, routing_key, token


def test_tokens_of_single_and_composite_partition_keys_match_the_driver(
    cql_server: CqlServer, cql_session: Any
) -> None:
    schema = hub_schema(unique("hub"))  # partition key (org text, id bigint)
    cql_session.execute(cql.create_table(KEYSPACE, schema).text)
    table = cql_server.storage.catalog.table(KEYSPACE, schema.name)
    write = cql_session.prepare(cql.upsert(KEYSPACE, schema.name, ["org", "id"], ["n"]).text)
    for org, id_ in [("acme", 7), ("", 0), ("ü", -(2**63)), ("x" * 300, 2**63 - 1)]:
        bound = write.bind((1, 0, 1, org, id_))
        assert bound.routing_key == routing_key(table, [org, id_])
        assert (
            token(bound.routing_key)
            == Murmur3Token.from_key(bound.routing_key).value
            == token_of(bound.routing_key)
        )
    single = cql_server.storage.catalog.table(KEYSPACE, timeline(cql_session).name)
    assert routing_key(single, ["org1"]) == b"org1"
    assert MIN_TOKEN < token(b"org1") <= MAX_TOKEN


def test_the_driver_routes_every_key_to_the_one_node(cql_session: Any) -> None:
    cluster = cql_session.cluster
    token_map = cluster.metadata.token_map
    host = cluster.metadata.all_hosts()[0]
    for key in (b"a", b"org1", b"\x00" * 9):
        assert token_map.get_replicas(KEYSPACE, token_map.token_class.from_key(key)) == [host]
