"""Keyspaces and tables as CQL declared them, and their mapping onto the embedded engine's schema."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from dataclasses import dataclass, field

from cassandra import cqltypes

from framework.core.mutations import MutationError, check_identifier
from framework.core.schema import Column, TableSchema
from tests.support.cql_server import ast
from tests.support.cql_server.errors import AlreadyExists, ConfigurationError, InvalidRequest

__all__ = ["CQL_TYPES", "TableDef", "KeyspaceDef", "Catalog", "ColumnSpec", "MAX_TTL"]

#: The column types the server stores (the adapter's TableSchema types), by CQL name.
CQL_TYPES: dict[str, type[cqltypes._CassandraType]] = {
    "text": cqltypes.UTF8Type,
    "varchar": cqltypes.UTF8Type,
    "bigint": cqltypes.LongType,
    "int": cqltypes.Int32Type,
    "double": cqltypes.DoubleType,
    "boolean": cqltypes.BooleanType,
    "blob": cqltypes.BytesType,
}
#: Cassandra's largest TTL (20 years).
MAX_TTL = 630_720_000
_TABLE_OPTIONS = ("comment", "default_time_to_live")


@dataclass(frozen=True)
class TableDef:
    """A table: columns in declared order, primary key, one clustering order, options."""

    keyspace: str
    name: str
    columns: dict[str, str]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...]
    clustering_order: str = "ASC"
    default_ttl: int = 0
    comment: str = ""
    id: uuid.UUID = field(default_factory=uuid.uuid4)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.partition_key + self.clustering_key

    @property
    def regular(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.key_columns)

    def cqltype(self, column: str) -> type[cqltypes._CassandraType]:
        return CQL_TYPES[self.column_type(column)]

    def column_type(self, column: str) -> str:
        try:
            return self.columns[column]
        except KeyError:
            raise InvalidRequest(
                f"Undefined column name {column} in table {self.keyspace}.{self.name}"
            ) from None

    def star_columns(self) -> tuple[str, ...]:
        """``SELECT *`` order: partition key, clustering key, then regular columns by name."""
        return self.key_columns + tuple(sorted(self.regular))

    def engine_schema(self) -> TableSchema:
        """The engine's schema; TTLs are resolved by the server, so the engine has no default TTL."""
        return self._engine_schema

    @functools.cached_property
    def _engine_schema(self) -> TableSchema:

        def col(name: str) -> Column:
            t = self.columns[name]
            return Column(name, "text" if t == "varchar" else t)  # type: ignore[arg-type]

        return TableSchema(
            name=self.name,
            partition_key=tuple(col(c) for c in self.partition_key),
            clustering_key=tuple(col(c) for c in self.clustering_key),
            clustering_order=self.clustering_order,  # type: ignore[arg-type]
            columns=tuple(col(c) for c in self.regular),
        )


@dataclass
class KeyspaceDef:
    name: str
    replication: dict[str, str]
    durable_writes: bool = True
    tables: dict[str, TableDef] = field(default_factory=dict)


def _identifier(name: str, what: str) -> str:
    try:
        return check_identifier(name, what)
    except MutationError:
        raise InvalidRequest(
            f"{what} {name!r}: the test server stores only [A-Za-z][A-Za-z0-9_]{{0,47}}"
        ) from None


class Catalog:
    """The schema of every keyspace the server knows."""

    def __init__(self) -> None:
        self.keyspaces: dict[str, KeyspaceDef] = {}

    def keyspace(self, name: str) -> KeyspaceDef:
        ks = self.keyspaces.get(name)
        if ks is None:
            raise InvalidRequest(f"Keyspace '{name}' does not exist")
        return ks

    def table(self, keyspace: str, name: str) -> TableDef:
        table = self.keyspace(keyspace).tables.get(name)
        if table is None:
            raise InvalidRequest(f"unconfigured table {name}")
        return table

    def create_keyspace(self, stmt: ast.CreateKeyspace) -> bool:
        """Add the keyspace; False when it existed and IF NOT EXISTS was given."""
        if stmt.name in self.keyspaces:
            if stmt.if_not_exists:
                return False
            raise AlreadyExists(stmt.name)
        _identifier(stmt.name, "keyspace")
        strategy = stmt.replication.get("class", "").rsplit(".", 1)[-1]
        if strategy not in ("SimpleStrategy", "NetworkTopologyStrategy"):
            raise ConfigurationError(
                f"Unable to find replication strategy class {stmt.replication.get('class')!r}"
            )
        full = "org.apache.cassandra.locator." + strategy
        self.keyspaces[stmt.name] = KeyspaceDef(
            stmt.name, {**stmt.replication, "class": full}, stmt.durable_writes
        )
        return True

    def create_table(self, keyspace: str, stmt: ast.CreateTable) -> TableDef | None:
        """Add the table and return it; None when it existed and IF NOT EXISTS was given."""
        ks = self.keyspace(keyspace)
        name = stmt.table.name
        if name in ks.tables:
            if stmt.if_not_exists:
                return None
            raise AlreadyExists(keyspace, name)
        _identifier(name, "table")
        table = _table_def(keyspace, stmt)
        table.engine_schema()  # the engine accepts it
        ks.tables[name] = table
        return table

    def alter_table(self, keyspace: str, stmt: ast.AlterTable) -> TableDef:
        """Add regular columns to the table or set its options; the altered table (same id)."""
        old = self.table(keyspace, stmt.table.name)
        columns = dict(old.columns)
        for c in stmt.add:
            _identifier(c.name, "column")
            if c.name in columns:
                raise InvalidRequest(
                    f"Invalid column name {c.name} because it conflicts with an existing column"
                )
            if c.type not in CQL_TYPES:
                raise InvalidRequest(f"column type {c.type} is not supported by the CQL test server")
            columns[c.name] = c.type
        ttl, comment = _options(stmt.options, old.default_ttl, old.comment)
        table = dataclasses.replace(old, columns=columns, default_ttl=ttl, comment=comment)
        table.engine_schema()  # the engine accepts it
        self.keyspace(keyspace).tables[old.name] = table
        return table


def _options(options: dict[str, object], ttl: object = 0, comment: object = "") -> tuple[int, str]:
    """The table's default TTL and comment after ``options``; errors for other options or bad values."""
    for option in options:
        if option not in _TABLE_OPTIONS:
            raise InvalidRequest(f"table option {option} is not supported by the CQL test server")
    ttl = options.get("default_time_to_live", ttl)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL:
        raise ConfigurationError(f"default_time_to_live must be an integer in [0, {MAX_TTL}], got {ttl!r}")
    comment = options.get("comment", comment)
    if not isinstance(comment, str):
        raise ConfigurationError("comment must be a string")
    return ttl, comment


def _table_def(keyspace: str, stmt: ast.CreateTable) -> TableDef:
    columns: dict[str, str] = {}
    for c in stmt.columns:
        _identifier(c.name, "column")
        if c.name in columns:
            raise InvalidRequest(f"Multiple definition of identifier {c.name}")
        if c.type not in CQL_TYPES:
            raise InvalidRequest(f"column type {c.type} is not supported by the CQL test server")
        columns[c.name] = c.type
    for k in stmt.partition_key + stmt.clustering_key:
        if k not in columns:
            raise InvalidRequest(f"Unknown definition {k} referenced in PRIMARY KEY")
    if len(set(stmt.partition_key + stmt.clustering_key)) != len(stmt.partition_key + stmt.clustering_key):
        raise InvalidRequest("a column appears twice in the PRIMARY KEY")
    order = "ASC"
    if stmt.clustering_order:
        names = [n for n, _ in stmt.clustering_order]
        if names != list(stmt.clustering_key[: len(names)]) or len(names) != len(stmt.clustering_key):
            raise InvalidRequest("CLUSTERING ORDER BY must list the clustering columns in key order")
        orders = {o for _, o in stmt.clustering_order}
        if len(orders) > 1:
            raise InvalidRequest("mixed clustering orders are not supported by the CQL test server")
        order = orders.pop()
    ttl, comment = _options(stmt.options)
    return TableDef(
        keyspace, stmt.table.name, columns, stmt.partition_key, stmt.clustering_key, order, ttl, comment
    )


@dataclass(frozen=True)
class ColumnSpec:
    """A bind marker's or result column's ``keyspace.table.name`` and driver type class."""

    keyspace: str
    table: str
    name: str
    cqltype: type[cqltypes._CassandraType]
