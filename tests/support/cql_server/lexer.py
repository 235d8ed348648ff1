"""Tokens of CQL text: names, quoted names, string/number/blob literals, markers and symbols."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support.cql_server.errors import CqlSyntaxError

__all__ = ["Token", "tokenize"]

_PATTERNS = [
    ("space", r"\s+|--[^\n]*|//[^\n]*|/\*.*?\*/"),
    ("blob", r"0[xX][0-9a-fA-F]*"),
    ("float", r"-?\d+\.\d*(?:[eE][+-]?\d+)?|-?\d+[eE][+-]?\d+"),
    ("int", r"-?\d+"),
    ("name", r"[A-Za-z][A-Za-z0-9_]*"),
    ("qname", r'"(?:[^"]|"")+"'),
    ("string", r"'(?:[^']|'')*'"),
    ("symbol", r"<=|>=|!=|[()\[\],;.*=<>?{}:+\-]"),
]
_TOKEN = re.compile("|".join(f"(?P<{kind}>{p})" for kind, p in _PATTERNS), re.DOTALL)


@dataclass(frozen=True)
class Token:
    """``kind``: name (unquoted, lowercased), qname (quoted, exact), string, int, float, blob, symbol, end."""

    kind: str
    value: str
    pos: int

    def is_word(self, *words: str) -> bool:
        """True for an unquoted name equal to one of ``words`` (keywords are case-insensitive)."""
        return self.kind == "name" and self.value in words

    def is_symbol(self, *symbols: str) -> bool:
        return self.kind == "symbol" and self.value in symbols

    def describe(self) -> str:
        return "end of statement" if self.kind == "end" else repr(self.value)


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` followed by an ``end`` token; CqlSyntaxError on a character it cannot read."""
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CqlSyntaxError(f"line 1:{pos} unexpected character {text[pos]!r}")
        kind = m.lastgroup or "space"
        raw = m.group()
        pos = m.end()
        if kind == "space":
            continue
        if kind == "name":
            out.append(Token("name", raw.lower(), m.start()))
        elif kind == "qname":
            out.append(Token("qname", raw[1:-1].replace('""', '"'), m.start()))
        elif kind == "string":
            out.append(Token("string", raw[1:-1].replace("''", "'"), m.start()))
        else:
            out.append(Token(kind, raw, m.start()))
    out.append(Token("end", "", len(text)))
    return out
