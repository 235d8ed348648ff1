"""Declared table schemas for wide-column stores."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from framework.core.mutations import MutationError, check_identifier

__all__ = ["Column", "TableSchema", "ColumnType", "SchemaError", "state_log_schema"]

#: Column types every store supports (CQL names).
ColumnType = Literal["text", "bigint", "int", "double", "boolean", "blob"]
_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "bigint": (int,),
    "int": (int,),
    "double": (float, int),
    "boolean": (bool,),
    "blob": (bytes,),
}

#: The exact types that need no further check (no range: ``int`` columns are range-checked).
_EXACT: dict[str, frozenset[type]] = {name: frozenset(kinds) for name, kinds in _TYPES.items()}


class SchemaError(MutationError):
    """A mutation does not fit the declared schema, or a schema is malformed."""


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType

    def __post_init__(self) -> None:
        check_identifier(self.name, "column")
        if self.type not in _TYPES:
            raise SchemaError("column", f"{self.name}: unsupported type {self.type!r}")

    def check(self, value: Any) -> None:
        """Raise SchemaError unless ``value`` is None or of this column's type."""
        if value is None or (type(value) in _EXACT[self.type] and self.type != "int"):
            return
        if isinstance(value, bool) and self.type != "boolean":
            raise SchemaError(self.name, f"expected {self.type}, got bool")
        if not isinstance(value, _TYPES[self.type]):
            raise SchemaError(self.name, f"expected {self.type}, got {type(value).__name__}")
        if self.type == "int" and isinstance(value, int) and not -(2**31) <= value < 2**31:
            raise SchemaError(self.name, "int outside the signed 32-bit range")


@dataclass(frozen=True)
class TableSchema:
    """A table: partition key, clustering key (with one order), regular columns."""

    name: str
    partition_key: tuple[Column, ...]
    columns: tuple[Column, ...]
    clustering_key: tuple[Column, ...] = ()
    clustering_order: Literal["ASC", "DESC"] = "ASC"
    default_ttl: int | None = None

    def __post_init__(self) -> None:
        check_identifier(self.name, "table")
        if not self.partition_key:
            raise SchemaError("partition_key", f"{self.name}: needs at least one column")
        if self.clustering_order not in ("ASC", "DESC"):
            raise SchemaError("clustering_order", "must be ASC or DESC")
        names = [c.name for c in self.all_columns]
        if len(names) != len(set(names)):
            raise SchemaError("columns", f"{self.name}: duplicate column names")

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return self.partition_key + self.clustering_key

    @property
    def all_columns(self) -> tuple[Column, ...]:
        return self.partition_key + self.clustering_key + self.columns

    @functools.cached_property
    def _by_name(self) -> dict[str, Column]:
        return {c.name: c for c in self.all_columns}

    @functools.cached_property
    def _key_names(self) -> tuple[frozenset[str], frozenset[str]]:
        return frozenset(c.name for c in self.partition_key), frozenset(c.name for c in self.key_columns)

    @functools.cached_property
    def _regular(self) -> dict[str, Column]:
        return {c.name: c for c in self.columns}

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise SchemaError(name, f"no column {name!r} in table {self.name}") from None

    def check_key(self, key: Mapping[str, Any], *, partition_only: bool = False) -> None:
        """Raise SchemaError unless ``key`` names exactly the (partition) key columns."""
        wanted = self.partition_key if partition_only else self.key_columns
        if key.keys() != self._key_names[0 if partition_only else 1]:
            raise SchemaError(
                "key", f"{self.name}: expected key columns {[c.name for c in wanted]}, got {sorted(key)}"
            )
        for c in wanted:
            if key[c.name] is None:
                raise SchemaError(c.name, "key columns cannot be null")
            c.check(key[c.name])

    def check_cells(self, cells: Mapping[str, Any]) -> None:
        """Raise SchemaError unless every cell is a regular column of the right type."""
        regular = self._regular
        for name, value in cells.items():
            if name not in regular:
                raise SchemaError(name, f"{self.name}: {name!r} is not a regular column")
            regular[name].check(value)


def state_log_schema(
    name: str,
    partition_key: tuple[Column, ...],
    attrs: tuple[Column, ...] = (),
    order: Literal["ASC", "DESC"] = "ASC",
) -> TableSchema:
    """Schema of a state log: clustering ``(at, event_id)``, cells ``state`` + attrs."""
    return TableSchema(
        name=name,
        partition_key=partition_key,
        clustering_key=(Column("at", "bigint"), Column("event_id", "text")),
        clustering_order=order,
        columns=(Column("state", "text"), *attrs),
    )
