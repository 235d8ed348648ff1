"""What an app declares for ID mutation: where requests arrive and which tables hold owner ids;
``MutatingApp``: an app as the ID mutation job and the worker's ID map read it.

``IdMutation(requests_topic, columns=(OwnerColumn(table, id_column, tenant_column), ...))``
on ``App(id_mutation=...)``. Each declared table's partition key is exactly
its tenant column and its owner-id column, so the rows of one owner are one
partition, read and moved as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from framework.core.mutations import CellValue, check_identifier
from framework.core.schema import SchemaError, TableSchema
from framework.notifications.config import NotifyingApp

__all__ = ["OwnerColumn", "IdMutation", "MutatingApp", "check_id_mutation", "id_value", "map_topic_of"]


@dataclass(frozen=True, slots=True)
class OwnerColumn:
    """A table whose partitions belong to one owner: ``id_column`` holds the owner's id and
    ``tenant_column`` the tenant the id is unique in."""

    table: str
    id_column: str
    tenant_column: str

    def __post_init__(self) -> None:
        for what, name in (
            ("table", self.table),
            ("id_column", self.id_column),
            ("tenant_column", self.tenant_column),
        ):
            check_identifier(name, f"OwnerColumn.{what}")
        if self.id_column == self.tenant_column:
            raise ValueError(f"OwnerColumn {self.table}: id_column and tenant_column must differ")


@dataclass(frozen=True, slots=True)
class IdMutation:
    """ID mutation requests arrive on ``requests_topic``; ``columns`` name the owner tables."""

    requests_topic: str
    columns: tuple[OwnerColumn, ...]

    def __post_init__(self) -> None:
        if not self.requests_topic or not isinstance(self.requests_topic, str):
            raise ValueError("IdMutation: requests_topic must be a non-empty string")
        object.__setattr__(self, "columns", tuple(self.columns))
        if not self.columns:
            raise ValueError("IdMutation: declares no owner table")
        tables = [c.table for c in self.columns]
        if len(set(tables)) != len(tables):
            raise ValueError(f"IdMutation: a table is declared twice: {tables}")

    def column(self, table: str) -> OwnerColumn | None:
        """The owner column of ``table``, or None when the table holds no owner id."""
        for c in self.columns:
            if c.table == table:
                return c
        return None


def map_topic_of(app_name: str) -> str:
    """The topic the ID mutation job publishes the collapsed map to (the stream's lookup)."""
    return f"{app_name}.id_map"


def check_id_mutation(config: IdMutation, tables: Sequence[TableSchema]) -> None:
    """Raise SchemaError unless every declared table exists with the partition key
    ``(tenant_column, id_column)`` in either order."""
    by_name = {t.name: t for t in tables}
    for c in config.columns:
        schema = by_name.get(c.table)
        if schema is None:
            raise SchemaError("id_mutation", f"owner table {c.table!r} is not a table of the app")
        names = {col.name for col in schema.partition_key}
        if names != {c.id_column, c.tenant_column}:
            raise SchemaError(
                "id_mutation",
                f"owner table {c.table!r}: partition key must be exactly ({c.tenant_column}, {c.id_column}), "
                f"is {sorted(names)}",
            )


def id_value(schema: TableSchema, column: str, ident: str) -> CellValue:
    """An id (text in requests) as a value of ``column`` (text, or an integer column)."""
    kind = schema.column(column).type
    if kind == "text":
        return ident
    if kind in ("bigint", "int"):
        try:
            return int(ident)
        except ValueError:
            raise SchemaError(column, f"{schema.name}: id {ident!r} is not an integer") from None
    raise SchemaError(column, f"{schema.name}: an owner id column must be text or an integer, is {kind}")


class MutatingApp(NotifyingApp, Protocol):
    """A ``NotifyingApp`` with its ID mutation (None: none declared)."""

    @property
    def id_mutation(self) -> IdMutation | None: ...
