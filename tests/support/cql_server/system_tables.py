"""The system tables the driver reads: ``system.local``/``peers*`` and ``system_schema.*``.

They are computed from the catalog on every read. ``system.local`` reports a
constant non-null ``schema_version`` (one node, so schema agreement is
immediate) and a single token, so the driver builds a one-node Murmur3 ring.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cassandra import cqltypes as t

from tests.support.cql_server.catalog import Catalog, TableDef

__all__ = ["NodeInfo", "SystemTable", "SYSTEM_KEYSPACES", "system_table"]

SYSTEM_KEYSPACES = frozenset(
    {"system", "system_schema", "system_virtual_schema", "system_auth", "system_traces"}
)

_TEXT, _INT, _BOOL, _UUID, _INET, _BLOB, _DOUBLE = (
    t.UTF8Type, t.Int32Type, t.BooleanType, t.UUIDType, t.InetAddressType, t.BytesType, t.DoubleType,
)  # fmt: skip
_TEXT_SET = t.SetType.apply_parameters([t.UTF8Type])
_TEXT_LIST = t.ListType.apply_parameters([t.UTF8Type])
_TEXT_MAP = t.MapType.apply_parameters([t.UTF8Type, t.UTF8Type])


@dataclass(frozen=True)
class NodeInfo:
    """What ``system.local`` says about the one node."""

    host: str
    port: int
    host_id: uuid.UUID
    schema_version: uuid.UUID
    cluster_name: str = "converge-cql-test-server"
    data_center: str = "datacenter1"
    rack: str = "rack1"
    release_version: str = "4.0.11"
    cql_version: str = "3.4.5"
    token: str = "0"


#: Rows of a system table; ``where`` holds the query's equality filters (a provider may use them to
#: build fewer rows; the caller filters again).
Rows = Callable[[Catalog, NodeInfo, Mapping[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class SystemTable:
    keyspace: str
    name: str
    columns: tuple[tuple[str, type], ...]
    rows: Rows

    def cqltype(self, column: str) -> type | None:
        return dict(self.columns).get(column)


def _none(_: Catalog, __: NodeInfo, ___: Mapping[str, Any]) -> list[dict[str, Any]]:
    return []


def _local(_: Catalog, node: NodeInfo, __: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "key": "local", "bootstrapped": "COMPLETED", "broadcast_address": node.host,
            "cluster_name": node.cluster_name, "cql_version": node.cql_version,
            "data_center": node.data_center,
            "host_id": node.host_id, "listen_address": node.host, "native_protocol_version": "4",
            "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner", "rack": node.rack,
            "release_version": node.release_version, "rpc_address": node.host, "rpc_port": node.port,
            "schema_version": node.schema_version, "tokens": {node.token},
        }
    ]  # fmt: skip


def _keyspaces(catalog: Catalog, _: NodeInfo, where: Mapping[str, Any]) -> list[dict[str, Any]]:
    names = [where["keyspace_name"]] if "keyspace_name" in where else sorted(catalog.keyspaces)
    return [
        {"keyspace_name": ks.name, "durable_writes": ks.durable_writes, "replication": dict(ks.replication)}
        for ks in (catalog.keyspaces[n] for n in names if n in catalog.keyspaces)
    ]


def _all_tables(catalog: Catalog, where: Mapping[str, Any]) -> list[TableDef]:
    """The tables the filters can match (by keyspace and table name), in clustering order."""
    out: list[TableDef] = []
    for ks in [where["keyspace_name"]] if "keyspace_name" in where else sorted(catalog.keyspaces):
        tables = catalog.keyspaces[ks].tables if ks in catalog.keyspaces else {}
        names = [where["table_name"]] if "table_name" in where else sorted(tables)
        out += [tables[n] for n in names if n in tables]
    return out


def _tables(catalog: Catalog, _: NodeInfo, where: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "keyspace_name": tb.keyspace, "table_name": tb.name, "comment": tb.comment,
            "default_time_to_live": tb.default_ttl, "flags": {"compound"}, "id": tb.id,
            "gc_grace_seconds": 864000, "bloom_filter_fp_chance": 0.01, "crc_check_chance": 1.0,
            "caching": {"keys": "ALL", "rows_per_partition": "NONE"},
            "compaction": {"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy"},
            "compression": {"class": "org.apache.cassandra.io.compress.LZ4Compressor"},
            "speculative_retry": "99p", "memtable_flush_period_in_ms": 0,
            "min_index_interval": 128, "max_index_interval": 2048,
        }
        for tb in _all_tables(catalog, where)
    ]  # fmt: skip


def _columns(catalog: Catalog, _: NodeInfo, where: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for tb in _all_tables(catalog, where):
        for name in sorted(tb.columns):  # Cassandra clusters system_schema.columns by column name
            if name in tb.partition_key:
                kind, position, order = "partition_key", tb.partition_key.index(name), "none"
            elif name in tb.clustering_key:
                kind, position, order = (
                    "clustering",
                    tb.clustering_key.index(name),
                    tb.clustering_order.lower(),
                )
            else:
                kind, position, order = "regular", -1, "none"
            out.append(
                {
                    "keyspace_name": tb.keyspace, "table_name": tb.name, "column_name": name,
                    "clustering_order": order, "column_name_bytes": name.encode(), "kind": kind,
                    "position": position, "type": _normal(tb.columns[name]),
                }
            )  # fmt: skip
    return out


def _normal(type_name: str) -> str:
    return "text" if type_name == "varchar" else type_name


def _cols(spec: str) -> tuple[tuple[str, type], ...]:
    """Columns from ``"name type, name type, ..."``."""
    types = {
        "text": _TEXT, "int": _INT, "boolean": _BOOL, "uuid": _UUID, "inet": _INET, "blob": _BLOB,
        "double": _DOUBLE, "set<text>": _TEXT_SET, "list<text>": _TEXT_LIST, "map<text,text>": _TEXT_MAP,
    }  # fmt: skip
    return tuple((name, types[type_name]) for name, type_name in (c.split() for c in spec.split(", ")))


_PEER = (
    "peer inet, data_center text, host_id uuid, preferred_ip inet, rack text, release_version text, "
    "schema_version uuid, tokens set<text>"
)
_SCHEMA_COLUMNS = (
    "keyspace_name text, table_name text, column_name text, clustering_order text, "
    "column_name_bytes blob, kind text, position int, type text"
)
_LOCAL = (
    "key text, bootstrapped text, broadcast_address inet, cluster_name text, cql_version text, "
    "data_center text, host_id uuid, listen_address inet, native_protocol_version text, partitioner text, "
    "rack text, release_version text, rpc_address inet, rpc_port int, schema_version uuid, tokens set<text>"
)
_SCHEMA_TABLES = (
    "keyspace_name text, table_name text, bloom_filter_fp_chance double, caching map<text,text>, "
    "comment text, compaction map<text,text>, compression map<text,text>, crc_check_chance double, "
    "default_time_to_live int, flags set<text>, gc_grace_seconds int, id uuid, max_index_interval int, "
    "memtable_flush_period_in_ms int, min_index_interval int, speculative_retry text"
)
_EMPTY = {
    ("system_schema", "indexes"): "keyspace_name text, table_name text, index_name text, kind text, "
    "options map<text,text>",
    (
        "system_schema",
        "triggers",
    ): "keyspace_name text, table_name text, trigger_name text, options map<text,text>",
    (
        "system_schema",
        "views",
    ): "keyspace_name text, view_name text, base_table_id uuid, base_table_name text, "
    "include_all_columns boolean, where_clause text",
    ("system_schema", "types"): "keyspace_name text, type_name text, field_names list<text>, "
    "field_types list<text>",
    ("system_schema", "functions"): "keyspace_name text, function_name text, argument_names list<text>, "
    "argument_types list<text>, body text, called_on_null_input boolean, language text, return_type text",
    ("system_schema", "aggregates"): "keyspace_name text, aggregate_name text, argument_types list<text>, "
    "final_func text, initcond text, return_type text, state_func text, state_type text",
    ("system_virtual_schema", "keyspaces"): "keyspace_name text",
    ("system_virtual_schema", "tables"): "keyspace_name text, table_name text, comment text",
    ("system_virtual_schema", "columns"): _SCHEMA_COLUMNS,
    ("system", "peers"): _PEER + ", rpc_address inet",
    ("system", "peers_v2"): _PEER
    + ", peer_port int, native_address inet, native_port int, preferred_port int",
}
_TABLES = [
    SystemTable("system", "local", _cols(_LOCAL), _local),
    SystemTable("system_schema", "keyspaces", _cols(
        "keyspace_name text, durable_writes boolean, replication map<text,text>"), _keyspaces),
    SystemTable("system_schema", "tables", _cols(_SCHEMA_TABLES), _tables),
    SystemTable("system_schema", "columns", _cols(_SCHEMA_COLUMNS), _columns),
    *(SystemTable(ks, name, _cols(spec), _none) for (ks, name), spec in _EMPTY.items()),
]  # fmt: skip
_BY_NAME = {(tb.keyspace, tb.name): tb for tb in _TABLES}


def system_table(keyspace: str, name: str) -> SystemTable | None:
    """The system table ``keyspace.name``, or None when the server does not provide it."""
    return _BY_NAME.get((keyspace, name))
