"""Resolve parsed statements against the catalog: plans, bind-marker metadata and result columns.

Prepared statements are analysed once (at PREPARE); the plan names each value
by a ``Marker`` (bound at EXECUTE) or a ``Const`` (a literal, already typed).
"""

from __future__ import annotations

from cassandra import cqltypes

from framework.core.mutations import CellValue
from tests.support.cql_server import ast
from tests.support.cql_server.catalog import Catalog, ColumnSpec, TableDef
from tests.support.cql_server.cursor import unsupported
from tests.support.cql_server.errors import InvalidRequest, ServerFault
from tests.support.cql_server.plans import Analyzed, Bound, Const, Plan, SelectPlan, SystemPlan, WritePlan
from tests.support.cql_server.restrictions import restrict
from tests.support.cql_server.system_tables import SYSTEM_KEYSPACES, SystemTable, system_table

__all__ = ["analyze", "Analyzer"]

_SPECIAL = {"[timestamp]": "bigint", "[ttl]": "int", "[limit]": "int", "partition key token": "bigint"}
_TYPE_NAMES = {
    cqltypes.UTF8Type: "text",
    cqltypes.LongType: "bigint",
    cqltypes.Int32Type: "int",
    cqltypes.DoubleType: "double",
    cqltypes.BooleanType: "boolean",
    cqltypes.BytesType: "blob",
}


def analyze(stmt: ast.Statement, markers: int, catalog: Catalog, keyspace: str | None) -> Analyzed:
    """Resolve ``stmt`` (with ``markers`` bind markers) in ``keyspace``; InvalidRequest when it cannot run."""
    return Analyzer(catalog, keyspace, markers).run(stmt)


def _coerce(lit: ast.Literal, type_name: str, column: str) -> CellValue:
    """A literal as a value of ``type_name``; InvalidRequest when it does not fit."""
    v = lit.value
    ok = {
        "text": lit.kind == "string", "varchar": lit.kind == "string", "blob": lit.kind == "blob",
        "boolean": lit.kind == "boolean", "double": lit.kind in ("int", "float"),
        "bigint": lit.kind == "int" and -(2**63) <= v < 2**63,  # type: ignore[operator]
        "int": lit.kind == "int" and -(2**31) <= v < 2**31,  # type: ignore[operator]
    }.get(type_name, False)  # fmt: skip
    if lit.kind == "null":
        return None
    if not ok:
        raise InvalidRequest(
            f'Invalid {lit.kind.upper()} constant ({v!r}) for "{column}" of type {type_name}'
        )
    return float(v) if type_name == "double" else v  # type: ignore[arg-type, return-value]


class Analyzer:
    def __init__(self, catalog: Catalog, keyspace: str | None, markers: int) -> None:
        self.catalog = catalog
        self.keyspace = keyspace
        self.binds: list[ColumnSpec | None] = [None] * markers

    def run(self, stmt: ast.Statement) -> Analyzed:
        result: tuple[ColumnSpec, ...] = ()
        pk: tuple[int, ...] = ()
        plan: Plan
        if isinstance(stmt, ast.Use | ast.CreateKeyspace):
            plan = stmt
        elif isinstance(stmt, ast.CreateTable | ast.AlterTable):
            plan = (self.keyspace_of(stmt.table), stmt)
        elif isinstance(stmt, ast.Update | ast.Delete):
            plan = self.write(stmt)
            pk = _pk_indexes(plan.table, plan.key)
        else:
            plan, result = self.select(stmt)
            if isinstance(plan, SelectPlan):
                pk = _pk_indexes(plan.table, plan.key)
        if any(b is None for b in self.binds):
            raise ServerFault("a bind marker was left without metadata")
        return Analyzed(plan, tuple(b for b in self.binds if b is not None), pk, result)

    # -- names -------------------------------------------------------------------------------

    def keyspace_of(self, ref: ast.TableRef) -> str:
        ks = ref.keyspace or self.keyspace
        if ks is None:
            raise InvalidRequest(
                "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
            )
        return ks

    def table(self, ref: ast.TableRef) -> TableDef | SystemTable:
        ks = self.keyspace_of(ref)
        if ks in SYSTEM_KEYSPACES:
            found = system_table(ks, ref.name)
            if found is None:
                raise InvalidRequest(f"unconfigured table {ref.name} (not provided by the CQL test server)")
            return found
        return self.catalog.table(ks, ref.name)

    def user_table(self, ref: ast.TableRef) -> TableDef:
        tb = self.table(ref)
        if isinstance(tb, SystemTable):
            raise InvalidRequest(f"System keyspace '{tb.keyspace}' is not user-modifiable")
        return tb

    def bound(self, term: ast.Term, tb: TableDef | SystemTable, name: str) -> Bound:
        """Record a marker's metadata (column ``name`` of ``tb``, or a special marker) or type a literal."""
        if name in _SPECIAL:
            type_name = _SPECIAL[name]
            cqltype: type | None = cqltypes.LongType if type_name == "bigint" else cqltypes.Int32Type
        elif isinstance(tb, SystemTable):
            cqltype = tb.cqltype(name)
            type_name = _TYPE_NAMES.get(cqltype, "")
        else:
            type_name, cqltype = tb.column_type(name), tb.cqltype(name)
        if isinstance(term, ast.Marker):
            self.binds[term.index] = ColumnSpec(tb.keyspace, tb.name, name, cqltype)  # type: ignore[arg-type]
            return term
        return Const(_coerce(term, type_name, name))

    # -- writes ------------------------------------------------------------------------------

    def write(self, stmt: ast.Update | ast.Delete) -> WritePlan:
        tb = self.user_table(stmt.table)
        timestamp = None if stmt.timestamp is None else self.bound(stmt.timestamp, tb, "[timestamp]")
        if isinstance(stmt, ast.Update):
            ttl = None if stmt.ttl is None else self.bound(stmt.ttl, tb, "[ttl]")
            cells: dict[str, Bound] = {}
            for column, term in stmt.assignments:
                tb.column_type(column)
                if column in tb.key_columns:
                    raise InvalidRequest(f"PRIMARY KEY part {column} found in SET part")
                if column in cells:
                    raise InvalidRequest(f"Multiple definitions found for column {column}")
                cells[column] = self.bound(term, tb, column)
            key = self.key_equalities(tb, stmt.where, "UPDATE")
            missing = [c for c in tb.clustering_key if c not in key]
            if missing:
                raise InvalidRequest(f"Some clustering keys are missing: {', '.join(missing)}")
            return WritePlan(tb, key, cells, timestamp=timestamp, ttl=ttl)
        for column in stmt.columns:
            tb.column_type(column)
            if column in tb.key_columns:
                raise InvalidRequest(
                    f"Invalid identifier {column} for deletion (should not be a PRIMARY KEY part)"
                )
        key = self.key_equalities(tb, stmt.where, "DELETE")
        given = [c for c in tb.clustering_key if c in key]
        if given and len(given) < len(tb.clustering_key):
            raise unsupported("range deletions (DELETE with a clustering prefix)")
        if not given and tb.clustering_key and stmt.columns:
            raise InvalidRequest("Range deletions are not supported for specific columns")
        columns = tuple(dict.fromkeys(stmt.columns)) or None
        return WritePlan(tb, key, delete=True, columns=columns, timestamp=timestamp)

    def key_equalities(self, tb: TableDef, where: tuple[ast.Relation, ...], what: str) -> dict[str, Bound]:
        key: dict[str, Bound] = {}
        for rel in where:
            if rel.kind != "column":
                raise unsupported(
                    f"{'token()' if rel.kind == 'token' else 'multi-column'} relations in {what}"
                )
            column = rel.columns[0]
            tb.column_type(column)
            if column not in tb.key_columns:
                raise InvalidRequest(f"Non PRIMARY KEY columns found in where clause: {column}")
            if rel.op != "=":
                raise unsupported(f"slice restrictions ({column} {rel.op}) in {what}")
            if column in key:
                raise InvalidRequest(
                    f"{column} cannot be restricted by more than one relation if it includes an Equal"
                )
            key[column] = self.bound(rel.terms[0], tb, column)
        missing = [c for c in tb.partition_key if c not in key]
        if missing:
            raise InvalidRequest(f"Some partition key parts are missing: {', '.join(missing)}")
        return key

    # -- reads -------------------------------------------------------------------------------

    def select(self, stmt: ast.Select) -> tuple[SelectPlan | SystemPlan, tuple[ColumnSpec, ...]]:
        tb = self.table(stmt.table)
        if isinstance(tb, SystemTable):
            return self.system_select(tb, stmt)
        selection: list[tuple[str, str]] = []
        result: list[ColumnSpec] = []
        for sel in stmt.selectors or [ast.Selector("column", c) for c in tb.star_columns()]:
            tb.column_type(sel.column)
            if sel.kind != "column" and sel.column in tb.key_columns:
                fn = "writeTime" if sel.kind == "writetime" else "ttl"
                raise InvalidRequest(f"Cannot use selection function {fn} on PRIMARY KEY part {sel.column}")
            selection.append((sel.kind, sel.column))
            name = sel.alias or (sel.column if sel.kind == "column" else f"{sel.kind}({sel.column})")
            t = {"column": tb.cqltype(sel.column), "writetime": cqltypes.LongType, "ttl": cqltypes.Int32Type}
            result.append(ColumnSpec(tb.keyspace, tb.name, name, t[sel.kind]))
        plan = restrict(self.bound, tb, stmt, tuple(selection))
        return plan, tuple(result)

    def system_select(self, tb: SystemTable, stmt: ast.Select) -> tuple[SystemPlan, tuple[ColumnSpec, ...]]:
        names = [c for c, _ in tb.columns]
        columns: list[str] = []
        result: list[ColumnSpec] = []
        for sel in stmt.selectors or [ast.Selector("column", c) for c in names]:
            if sel.kind != "column":
                raise InvalidRequest(f"{sel.kind}() cannot be used on system tables of the CQL test server")
            if sel.column not in names:
                raise InvalidRequest(f"Undefined column name {sel.column} in table {tb.keyspace}.{tb.name}")
            columns.append(sel.column)
            result.append(ColumnSpec(tb.keyspace, tb.name, sel.alias or sel.column, tb.cqltype(sel.column)))  # type: ignore[arg-type]
        filters = []
        for rel in stmt.where:
            if rel.kind != "column" or rel.op != "=":
                raise unsupported("restrictions other than column = value on system tables")
            if rel.columns[0] not in names:
                raise InvalidRequest(
                    f"Undefined column name {rel.columns[0]} in table {tb.keyspace}.{tb.name}"
                )
            filters.append((rel.columns[0], self.bound(rel.terms[0], tb, rel.columns[0])))
        if stmt.order_by:
            raise unsupported("ORDER BY on system tables")
        limit = None if stmt.limit is None else self.bound(stmt.limit, tb, "[limit]")
        return SystemPlan(tb, tuple(columns), tuple(filters), limit), tuple(result)


def _pk_indexes(tb: TableDef, key: dict[str, Bound]) -> tuple[int, ...]:
    terms = [key.get(c) for c in tb.partition_key]
    if all(isinstance(t, ast.Marker) for t in terms):
        return tuple(t.index for t in terms)  # type: ignore[union-attr]
    return ()
