"""Parsed statements of the supported CQL subset (syntax only; names are not resolved yet)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Lit

__all__ = [
    "Marker",
    "Literal",
    "Term",
    "TableRef",
    "Relation",
    "Selector",
    "Select",
    "Update",
    "Delete",
    "CreateKeyspace",
    "ColumnDef",
    "CreateTable",
    "AlterTable",
    "Use",
    "Statement",
]


@dataclass(frozen=True)
class Marker:
    """A positional bind marker ``?``; ``index`` counts markers in text order from 0."""

    index: int


@dataclass(frozen=True)
class Literal:
    """A constant: ``kind`` is string, int, float, blob, boolean or null; ``value`` its Python value."""

    kind: str
    value: object


Term = Marker | Literal


@dataclass(frozen=True)
class TableRef:
    keyspace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.keyspace}.{self.name}" if self.keyspace else self.name


@dataclass(frozen=True)
class Relation:
    """``kind``: column (``a op t``), tuple (``(a, b) op (t, u)``) or token (``token(a, b) op t``)."""

    kind: Lit["column", "tuple", "token"]
    columns: tuple[str, ...]
    op: str
    terms: tuple[Term, ...]


@dataclass(frozen=True)
class Selector:
    """``kind``: column, writetime or ttl (of ``column``); ``alias`` from ``AS``."""

    kind: Lit["column", "writetime", "ttl"]
    column: str
    alias: str | None = None


@dataclass(frozen=True)
class Select:
    table: TableRef
    selectors: tuple[Selector, ...] | None  # None = *
    where: tuple[Relation, ...] = ()
    order_by: tuple[tuple[str, str], ...] = ()
    limit: Term | None = None


@dataclass(frozen=True)
class Update:
    table: TableRef
    assignments: tuple[tuple[str, Term], ...]
    where: tuple[Relation, ...]
    timestamp: Term | None = None
    ttl: Term | None = None


@dataclass(frozen=True)
class Delete:
    table: TableRef
    columns: tuple[str, ...]
    where: tuple[Relation, ...]
    timestamp: Term | None = None


@dataclass(frozen=True)
class CreateKeyspace:
    name: str
    if_not_exists: bool
    replication: dict[str, str]
    durable_writes: bool = True


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: str


@dataclass(frozen=True)
class CreateTable:
    table: TableRef
    if_not_exists: bool
    columns: tuple[ColumnDef, ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[str, ...]
    clustering_order: tuple[tuple[str, str], ...] = ()
    options: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class AlterTable:
    """``ALTER TABLE``: regular columns to ``add``, or table ``options`` to set."""

    table: TableRef
    add: tuple[ColumnDef, ...] = ()
    options: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Use:
    keyspace: str


Statement = Select | Update | Delete | CreateKeyspace | CreateTable | AlterTable | Use
