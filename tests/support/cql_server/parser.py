"""A recursive-descent parser for exactly the CQL subset the Cassandra adapter and the driver send.

Constructs outside the subset (INSERT, IN, IF, collections, functions, ...) raise
CqlSyntaxError naming the construct, so nothing is silently misread.
"""

from __future__ import annotations

import functools

from tests.support.cql_server import ast
from tests.support.cql_server.cursor import unsupported
from tests.support.cql_server.ddl import DdlParser
from tests.support.cql_server.errors import CqlSyntaxError

__all__ = ["parse", "unsupported"]

_OPERATORS = ("=", "<", ">", "<=", ">=")


@functools.lru_cache(maxsize=512)
def parse(text: str) -> tuple[ast.Statement, int]:
    """The statement in ``text`` and its number of bind markers; CqlSyntaxError when not in the subset.

    Cached: the driver repeats its control queries (statements are never mutated).
    """
    p = _Parser(text)
    stmt = p.statement()
    p.accept_symbol(";")
    if p.peek().kind != "end":
        raise p.error("end of statement")
    return stmt, p.markers


class _Parser(DdlParser):
    """Statements: SELECT, UPDATE, DELETE, CREATE KEYSPACE/TABLE, ALTER TABLE, USE."""

    def statement(self) -> ast.Statement:
        tok = self.peek()
        if tok.is_word("select"):
            return self.select()
        if tok.is_word("update"):
            return self.update()
        if tok.is_word("delete"):
            return self.delete()
        if tok.is_word("create"):
            self.next()
            if self.peek().is_word("keyspace", "schema"):
                return self.create_keyspace()
            if self.peek().is_word("table", "columnfamily"):
                return self.create_table()
            raise unsupported(f"CREATE {self.peek().value.upper()}")
        if tok.is_word("alter"):
            self.next()
            if self.peek().is_word("table", "columnfamily"):
                return self.alter_table()
            raise unsupported(f"ALTER {self.peek().value.upper()}")
        if tok.is_word("use"):
            self.next()
            return ast.Use(self.ident("a keyspace name"))
        if tok.is_word("insert"):
            raise unsupported("INSERT (it writes a row marker; the adapter writes with UPDATE)")
        if tok.is_word("begin"):
            raise unsupported("BEGIN BATCH in CQL text (send a BATCH message)")
        if tok.kind == "name":
            raise unsupported(f"{tok.value.upper()} statement")
        raise self.error("a statement")

    def select(self) -> ast.Select:
        self.expect_word("select")
        if (
            self.peek().is_word("json", "distinct")
            and not self.peek(1).is_symbol(",")
            and not self.peek(1).is_word("from")
        ):
            raise unsupported(f"SELECT {self.next().value.upper()}")
        selectors: tuple[ast.Selector, ...] | None = None
        if not self.accept_symbol("*"):
            found = [self.selector()]
            while self.accept_symbol(","):
                found.append(self.selector())
            selectors = tuple(found)
        self.expect_word("from")
        table = self.table_ref()
        where = self.where() if self.accept_word("where") else ()
        if self.peek().is_word("group"):
            raise unsupported("GROUP BY")
        order: list[tuple[str, str]] = []
        if self.accept_word("order"):
            self.expect_word("by")
            while True:
                name = self.ident()
                order.append((name, (self.accept_word("asc", "desc") or "asc").upper()))
                if not self.accept_symbol(","):
                    break
        if self.peek().is_word("per"):
            raise unsupported("PER PARTITION LIMIT")
        limit = self.term() if self.accept_word("limit") else None
        if self.accept_word("allow"):
            self.expect_word("filtering")
        return ast.Select(table, selectors, where, tuple(order), limit)

    def selector(self) -> ast.Selector:
        tok = self.peek()
        if tok.kind == "name" and self.peek(1).is_symbol("("):
            if tok.value not in ("writetime", "ttl"):
                raise unsupported(f"function {tok.value}() in a selection")
            self.next()
            self.expect_symbol("(")
            column = self.ident("a column name")
            self.expect_symbol(")")
            sel = ast.Selector("writetime" if tok.value == "writetime" else "ttl", column)
        else:
            sel = ast.Selector("column", self.ident("a column name or *"))
        if self.accept_word("as"):
            return ast.Selector(sel.kind, sel.column, self.ident("an alias"))
        return sel

    def where(self) -> tuple[ast.Relation, ...]:
        relations = [self.relation()]
        while self.accept_word("and"):
            relations.append(self.relation())
        if self.peek().is_word("or"):
            raise unsupported("OR in WHERE")
        return tuple(relations)

    def relation(self) -> ast.Relation:
        if self.peek().is_word("token") and self.peek(1).is_symbol("("):
            self.next()
            columns = self.ident_list()
            return ast.Relation("token", columns, self.operator(), (self.term(),))
        if self.peek().is_symbol("("):
            columns = self.ident_list()
            op = self.operator()
            self.expect_symbol("(")
            terms = [self.term()]
            while self.accept_symbol(","):
                terms.append(self.term())
            self.expect_symbol(")")
            if len(terms) != len(columns):
                raise CqlSyntaxError(f"{len(columns)} columns compared with {len(terms)} values")
            return ast.Relation("tuple", columns, op, tuple(terms))
        column = self.ident("a column name")
        return ast.Relation("column", (column,), self.operator(), (self.term(),))

    def operator(self) -> str:
        if self.peek().is_word("in", "contains", "like", "is"):
            raise unsupported(f"{self.next().value.upper()} restrictions")
        if self.peek().is_symbol("!="):
            raise unsupported("!= restrictions")
        op = self.accept_symbol(*_OPERATORS)
        if op is None:
            raise self.error("one of = < > <= >=")
        return op

    def using(self, allow_ttl: bool) -> tuple[ast.Term | None, ast.Term | None]:
        timestamp = ttl = None
        while True:
            if self.accept_word("timestamp"):
                timestamp = self.term()
            elif self.peek().is_word("ttl"):
                if not allow_ttl:
                    raise unsupported("USING TTL in DELETE")
                self.next()
                ttl = self.term()
            else:
                raise self.error("TIMESTAMP or TTL")
            if not self.accept_word("and"):
                return timestamp, ttl

    def update(self) -> ast.Update:
        self.expect_word("update")
        table = self.table_ref()
        timestamp, ttl = self.using(allow_ttl=True) if self.accept_word("using") else (None, None)
        self.expect_word("set")
        assignments = [self.assignment()]
        while self.accept_symbol(","):
            assignments.append(self.assignment())
        self.expect_word("where")
        where = self.where()
        if self.peek().is_word("if"):
            raise unsupported("conditional UPDATE (IF, a lightweight transaction)")
        return ast.Update(table, tuple(assignments), where, timestamp, ttl)

    def assignment(self) -> tuple[str, ast.Term]:
        column = self.ident("a column name")
        if self.peek().is_symbol("[", "."):
            raise unsupported("collection element and field updates")
        self.expect_symbol("=")
        if self.peek().kind in ("name", "qname") and self.peek(1).is_symbol("+", "-"):
            raise unsupported("counter and collection arithmetic in SET")
        term = self.term()
        if self.peek().is_symbol("+", "-"):
            raise unsupported("counter and collection arithmetic in SET")
        return column, term

    def delete(self) -> ast.Delete:
        self.expect_word("delete")
        columns: list[str] = []
        if not self.peek().is_word("from"):
            columns.append(self.ident("a column name or FROM"))
            while self.accept_symbol(","):
                columns.append(self.ident("a column name"))
            if self.peek().is_symbol("[", "."):
                raise unsupported("collection element and field deletes")
        self.expect_word("from")
        table = self.table_ref()
        timestamp = self.using(allow_ttl=False)[0] if self.accept_word("using") else None
        self.expect_word("where")
        where = self.where()
        if self.peek().is_word("if"):
            raise unsupported("conditional DELETE (IF, a lightweight transaction)")
        return ast.Delete(table, tuple(columns), where, timestamp)
