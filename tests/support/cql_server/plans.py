"""Plans: what an analysed statement does, with each value a bind ``Marker`` or a typed ``Const``."""

from __future__ import annotations

from dataclasses import dataclass, field

from framework.core.mutations import CellValue
from tests.support.cql_server import ast
from tests.support.cql_server.catalog import ColumnSpec, TableDef
from tests.support.cql_server.system_tables import SystemTable

__all__ = ["Const", "Bound", "WritePlan", "SelectPlan", "SystemPlan", "Plan", "Analyzed"]


@dataclass(frozen=True)
class Const:
    value: CellValue


Bound = ast.Marker | Const


@dataclass(frozen=True)
class WritePlan:
    """UPDATE (``cells``) or DELETE (``delete``; ``columns`` for cell deletes) of rows at ``key``."""

    table: TableDef
    key: dict[str, Bound]
    cells: dict[str, Bound] = field(default_factory=dict)
    delete: bool = False
    columns: tuple[str, ...] | None = None
    timestamp: Bound | None = None
    ttl: Bound | None = None


@dataclass(frozen=True)
class SelectPlan:
    """``mode``: row (full key), partition (``prefix``/``start``/``end`` bounds) or scan (``tokens``)."""

    table: TableDef
    selection: tuple[tuple[str, str], ...]  # (column | writetime | ttl, column)
    mode: str
    key: dict[str, Bound] = field(default_factory=dict)
    prefix: tuple[Bound, ...] = ()
    start: tuple[Bound, ...] = ()
    end: tuple[Bound, ...] = ()
    reverse: bool = False
    tokens: tuple[tuple[str, Bound], ...] = ()
    limit: Bound | None = None


@dataclass(frozen=True)
class SystemPlan:
    table: SystemTable
    columns: tuple[str, ...]
    filters: tuple[tuple[str, Bound], ...] = ()
    limit: Bound | None = None


Schema = tuple[str, ast.CreateTable | ast.AlterTable]  # (keyspace, statement)
Plan = ast.Use | ast.CreateKeyspace | Schema | WritePlan | SelectPlan | SystemPlan


@dataclass(frozen=True)
class Analyzed:
    """A statement ready to run: its plan, one ColumnSpec per bind marker, pk indexes, result columns."""

    plan: Plan
    binds: tuple[ColumnSpec, ...] = ()
    pk_indexes: tuple[int, ...] = ()
    result: tuple[ColumnSpec, ...] = ()
