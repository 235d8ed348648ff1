"""A token cursor for the CQL parser: lookahead, expectations, identifiers, terms and literals."""

from __future__ import annotations

from tests.support.cql_server import ast
from tests.support.cql_server.errors import CqlSyntaxError
from tests.support.cql_server.lexer import Token, tokenize

__all__ = ["Cursor", "unsupported"]

# Cassandra's reserved keywords: never an unquoted identifier.
_RESERVED = frozenset(
    "add allow alter and apply asc authorize batch begin by columnfamily create delete desc describe drop "
    "entries execute from full grant if in index infinity insert into keyspace limit modify nan norecursive "
    "not null of on or order primary rename replace revoke schema select set table to token truncate "
    "unlogged update use using where with".split()
)


def unsupported(construct: str) -> CqlSyntaxError:
    """The error for valid CQL that this test server does not implement."""
    return CqlSyntaxError(f"{construct} is not supported by the CQL test server (a protocol test double)")


class Cursor:
    """Reads tokens of one statement; counts bind markers in text order."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.markers = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def error(self, expected: str) -> CqlSyntaxError:
        tok = self.peek()
        return CqlSyntaxError(f"line 1:{tok.pos} mismatched input {tok.describe()} expecting {expected}")

    def accept_word(self, *words: str) -> str | None:
        if self.peek().is_word(*words):
            return self.next().value
        return None

    def expect_word(self, word: str) -> None:
        if not self.accept_word(word):
            raise self.error(word.upper())

    def accept_symbol(self, *symbols: str) -> str | None:
        if self.peek().is_symbol(*symbols):
            return self.next().value
        return None

    def expect_symbol(self, symbol: str) -> None:
        if not self.accept_symbol(symbol):
            raise self.error(repr(symbol))

    def ident(self, what: str = "an identifier") -> str:
        tok = self.peek()
        if tok.kind == "qname" or (tok.kind == "name" and tok.value not in _RESERVED):
            return self.next().value
        raise self.error(what)

    def ident_list(self) -> tuple[str, ...]:
        self.expect_symbol("(")
        names = [self.ident()]
        while self.accept_symbol(","):
            names.append(self.ident())
        self.expect_symbol(")")
        return tuple(names)

    def table_ref(self) -> ast.TableRef:
        first = self.ident("a table name")
        if self.accept_symbol("."):
            return ast.TableRef(first, self.ident("a table name"))
        return ast.TableRef(None, first)

    def term(self) -> ast.Term:
        tok = self.peek()
        if tok.is_symbol("?"):
            self.next()
            self.markers += 1
            return ast.Marker(self.markers - 1)
        if tok.is_symbol(":"):
            raise unsupported("named bind markers")
        if tok.is_symbol("[", "{", "("):
            raise unsupported("collection and tuple literals")
        if tok.kind in ("string", "int", "float", "blob") or tok.is_word("true", "false", "null"):
            self.next()
            return _literal(tok)
        if tok.kind == "name" and self.peek(1).is_symbol("("):
            raise unsupported(f"function {tok.value}() in a term")
        raise self.error("a bind marker or a literal")


def _literal(tok: Token) -> ast.Literal:
    if tok.kind == "string":
        return ast.Literal("string", tok.value)
    if tok.kind == "int":
        return ast.Literal("int", int(tok.value))
    if tok.kind == "float":
        return ast.Literal("float", float(tok.value))
    if tok.kind == "blob":
        digits = tok.value[2:]
        if len(digits) % 2:
            raise CqlSyntaxError(f"blob literal {tok.value} has an odd number of hex digits")
        return ast.Literal("blob", bytes.fromhex(digits))
    if tok.value == "null":
        return ast.Literal("null", None)
    return ast.Literal("boolean", tok.value == "true")
