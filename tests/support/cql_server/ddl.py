"""CREATE KEYSPACE, CREATE TABLE and ALTER TABLE (ADD, WITH), as the adapter writes them.

No collections, STATIC or COMPACT STORAGE; ALTER never drops, renames or retypes a column.
"""

from __future__ import annotations

from tests.support.cql_server import ast
from tests.support.cql_server.cursor import Cursor, unsupported
from tests.support.cql_server.errors import CqlSyntaxError

__all__ = ["DdlParser"]


class DdlParser(Cursor):
    def if_not_exists(self) -> bool:
        if not self.accept_word("if"):
            return False
        self.expect_word("not")
        self.expect_word("exists")
        return True

    def create_keyspace(self) -> ast.CreateKeyspace:
        self.next()  # KEYSPACE | SCHEMA
        exists = self.if_not_exists()
        name = self.ident("a keyspace name")
        self.expect_word("with")
        replication: dict[str, str] | None = None
        durable = True
        while True:
            prop = self.ident("a keyspace property")
            self.expect_symbol("=")
            if prop == "replication":
                replication = self.map_literal()
            elif prop == "durable_writes":
                value = self.term()
                if not isinstance(value, ast.Literal) or value.kind != "boolean":
                    raise CqlSyntaxError("durable_writes must be true or false")
                durable = bool(value.value)
            else:
                raise unsupported(f"keyspace property {prop}")
            if not self.accept_word("and"):
                break
        if replication is None:
            raise CqlSyntaxError("CREATE KEYSPACE needs a replication map")
        return ast.CreateKeyspace(name, exists, replication, durable)

    def map_literal(self) -> dict[str, str]:
        self.expect_symbol("{")
        out: dict[str, str] = {}
        while not self.accept_symbol("}"):
            if out:
                self.expect_symbol(",")
            key = self.term()
            self.expect_symbol(":")
            value = self.term()
            if not isinstance(key, ast.Literal) or not isinstance(value, ast.Literal):
                raise CqlSyntaxError("a map literal takes constants only")
            out[str(key.value)] = str(value.value)
        return out

    def create_table(self) -> ast.CreateTable:
        self.next()  # TABLE | COLUMNFAMILY
        exists = self.if_not_exists()
        table = self.table_ref()
        self.expect_symbol("(")
        columns: list[ast.ColumnDef] = []
        partition: tuple[str, ...] = ()
        clustering: tuple[str, ...] = ()
        while True:
            if self.accept_word("primary"):
                self.expect_word("key")
                if partition:
                    raise CqlSyntaxError("more than one PRIMARY KEY")
                partition, clustering = self.primary_key()
            else:
                name = self.ident("a column name")
                columns.append(ast.ColumnDef(name, self.column_type()))
                if self.peek().is_word("static"):
                    raise unsupported("STATIC columns")
                if self.accept_word("primary"):
                    self.expect_word("key")
                    if partition:
                        raise CqlSyntaxError("more than one PRIMARY KEY")
                    partition = (name,)
            if not self.accept_symbol(","):
                break
        self.expect_symbol(")")
        order: list[tuple[str, str]] = []
        options: dict[str, object] = {}
        if self.accept_word("with"):
            while True:
                if self.accept_word("clustering"):
                    self.expect_word("order")
                    self.expect_word("by")
                    self.expect_symbol("(")
                    while True:
                        name = self.ident()
                        order.append((name, (self.accept_word("asc", "desc") or "asc").upper()))
                        if not self.accept_symbol(","):
                            break
                    self.expect_symbol(")")
                elif self.peek().is_word("compact"):
                    raise unsupported("COMPACT STORAGE")
                else:
                    self.table_option(options)
                if not self.accept_word("and"):
                    break
        if not partition:
            raise CqlSyntaxError("no PRIMARY KEY specified")
        return ast.CreateTable(table, exists, tuple(columns), partition, clustering, tuple(order), options)

    def table_option(self, options: dict[str, object]) -> None:
        prop = self.ident("a table option")
        self.expect_symbol("=")
        value = self.map_literal() if self.peek().is_symbol("{") else self.term()
        if isinstance(value, ast.Marker):
            raise CqlSyntaxError("bind markers are not allowed in table options")
        options[prop] = value.value if isinstance(value, ast.Literal) else value

    def alter_table(self) -> ast.AlterTable:
        """``ALTER TABLE t ADD c type``, ``ADD (c type, ..)`` or ``WITH option = value [AND ..]``."""
        self.next()  # TABLE | COLUMNFAMILY
        table = self.table_ref()
        if self.accept_word("add"):
            if self.peek().is_word("if"):
                raise unsupported("ADD IF NOT EXISTS (Cassandra 5)")
            grouped = self.accept_symbol("(") is not None
            columns: list[ast.ColumnDef] = []
            while True:
                name = self.ident("a column name")
                columns.append(ast.ColumnDef(name, self.column_type()))
                if self.peek().is_word("static"):
                    raise unsupported("STATIC columns")
                if not grouped or not self.accept_symbol(","):
                    break
            if grouped:
                self.expect_symbol(")")
            return ast.AlterTable(table, add=tuple(columns))
        if self.accept_word("with"):
            options: dict[str, object] = {}
            while True:
                self.table_option(options)
                if not self.accept_word("and"):
                    break
            return ast.AlterTable(table, options=options)
        if self.peek().is_word("drop", "alter", "rename"):
            raise unsupported(f"ALTER TABLE .. {self.peek().value.upper()} (columns are only ever added)")
        raise self.error("ADD or WITH")

    def column_type(self) -> str:
        tok = self.peek()
        if tok.kind != "name":
            raise self.error("a column type")
        self.next()
        if self.peek().is_symbol("<"):
            raise unsupported(f"type {tok.value}<...> (collections, frozen and tuples)")
        return tok.value

    def primary_key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        self.expect_symbol("(")
        partition = self.ident_list() if self.peek().is_symbol("(") else (self.ident(),)
        clustering: list[str] = []
        while self.accept_symbol(","):
            clustering.append(self.ident())
        self.expect_symbol(")")
        return partition, tuple(clustering)
