"""The WHERE / ORDER BY / LIMIT of a SELECT on a user table, as one of three read modes.

- row: every primary key column restricted by ``=`` (the adapter's ``read_row``);
- partition: the partition key by ``=``, the clustering key by an ``=`` prefix or
  inclusive multi-column bounds ``(c1, c2) >= (?, ?)`` / ``<=`` (``read_partition``);
- scan: ``token(pk...)`` bounds, or no WHERE at all (``scan``).
Anything else is refused with an error naming the restriction.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.support.cql_server import ast
from tests.support.cql_server.catalog import TableDef
from tests.support.cql_server.cursor import unsupported
from tests.support.cql_server.errors import InvalidRequest
from tests.support.cql_server.plans import Bound, SelectPlan

__all__ = ["restrict"]

Binder = Callable[[ast.Term, TableDef, str], Bound]
_NEEDS_PARTITION = "ORDER BY is only supported when the partition key is restricted by an EQ or an IN."
_FILTERING = (
    "Cannot execute this query as it might involve data filtering and thus may have unpredictable "
    "performance (the CQL test server never filters)"
)


class _Where:
    def __init__(self, bind: Binder, tb: TableDef) -> None:
        self.bind, self.tb = bind, tb
        self.pk: dict[str, Bound] = {}
        self.ck: dict[str, Bound] = {}
        self.start: tuple[Bound, ...] = ()
        self.end: tuple[Bound, ...] = ()
        self.tokens: list[tuple[str, Bound]] = []

    def add(self, rel: ast.Relation) -> None:
        tb = self.tb
        for column in rel.columns:
            tb.column_type(column)
        if rel.kind == "token":
            if rel.columns != tb.partition_key:
                raise InvalidRequest(
                    f"The token function arguments must be the partition key in order: {tb.partition_key}"
                )
            value = self.bind(rel.terms[0], tb, "partition key token")
            self.tokens += [(">=", value), ("<=", value)] if rel.op == "=" else [(rel.op, value)]
            return
        if rel.kind == "tuple" or (rel.columns[0] in tb.clustering_key and rel.op != "="):
            self.bound(rel)
            return
        column = rel.columns[0]
        if column not in tb.key_columns:
            raise InvalidRequest(f"{_FILTERING}: restriction on the regular column {column}")
        if rel.op != "=" and column in tb.partition_key:
            raise InvalidRequest(
                "Only EQ and IN relation are supported on the partition key "
                "(unless you use the token() function)"
            )
        target = self.pk if column in tb.partition_key else self.ck
        if column in target:
            raise InvalidRequest(
                f"{column} cannot be restricted by more than one relation if it includes an Equal"
            )
        target[column] = self.bind(rel.terms[0], tb, column)

    def bound(self, rel: ast.Relation) -> None:
        columns = rel.columns
        if columns != self.tb.clustering_key[: len(columns)]:
            raise InvalidRequest(
                "Multi-column and slice restrictions must name a prefix of the clustering key "
                f"{self.tb.clustering_key}"
            )
        values = tuple(self.bind(t, self.tb, c) for c, t in zip(columns, rel.terms, strict=True))
        if rel.op == "=":
            for c, v in zip(columns, values, strict=True):
                if c in self.ck:
                    raise InvalidRequest(
                        f"{c} cannot be restricted by more than one relation if it includes an Equal"
                    )
                self.ck[c] = v
        elif rel.op == ">=" and not self.start:
            self.start = values
        elif rel.op == "<=" and not self.end:
            self.end = values
        elif rel.op in (">=", "<="):
            raise InvalidRequest(
                f"More than one restriction was found for the {'start' if rel.op == '>=' else 'end'} bound"
            )
        else:
            raise unsupported(f"exclusive clustering bounds ({rel.op}); use >= and <=")


def restrict(
    bind: Binder, tb: TableDef, stmt: ast.Select, selection: tuple[tuple[str, str], ...]
) -> SelectPlan:
    """The SelectPlan of ``stmt`` on ``tb``; InvalidRequest or CqlSyntaxError outside the subset."""
    w = _Where(bind, tb)
    for rel in stmt.where:
        w.add(rel)
    limit = None if stmt.limit is None else bind(stmt.limit, tb, "[limit]")
    if w.tokens or not w.pk:
        if w.pk or w.ck or w.start or w.end:
            if w.tokens:
                raise unsupported("token() restrictions combined with key restrictions")
            raise InvalidRequest(f"{_FILTERING}: the partition key is not restricted")
        if stmt.order_by:
            raise InvalidRequest(_NEEDS_PARTITION)
        return SelectPlan(tb, selection, "scan", tokens=tuple(w.tokens), limit=limit)
    missing = [c for c in tb.partition_key if c not in w.pk]
    if missing:
        raise InvalidRequest(
            f"Partition key parts {', '.join(missing)} must be restricted as other parts are"
        )
    prefix = [c for c in tb.clustering_key if c in w.ck]
    if prefix != list(tb.clustering_key[: len(prefix)]):
        gap = next(c for c in tb.clustering_key if c not in w.ck)
        raise InvalidRequest(
            f"PRIMARY KEY column {prefix[-1]} cannot be restricted as preceding column {gap} "
            "is not restricted"
        )
    reverse = _reverse(tb, stmt.order_by)
    if len(prefix) == len(tb.clustering_key) and not (w.start or w.end):
        return SelectPlan(tb, selection, "row", key={**w.pk, **w.ck}, reverse=reverse, limit=limit)
    if prefix and (w.start or w.end):
        raise unsupported("clustering equalities combined with multi-column bounds")
    return SelectPlan(
        tb, selection, "partition", key=dict(w.pk), prefix=tuple(w.ck[c] for c in prefix), start=w.start,
        end=w.end, reverse=reverse, limit=limit,
    )  # fmt: skip


def _reverse(tb: TableDef, order_by: tuple[tuple[str, str], ...]) -> bool:
    """True when ORDER BY asks for the reverse of the declared clustering order."""
    if not order_by:
        return False
    names = tuple(n for n, _ in order_by)
    for n in names:
        tb.column_type(n)
    if names != tb.clustering_key[: len(names)]:
        raise InvalidRequest(
            "Order by currently only supports the ordering of columns following their declared order "
            "in the PRIMARY KEY"
        )
    flips = {direction != tb.clustering_order for _, direction in order_by}
    if len(flips) > 1:
        raise InvalidRequest("Unsupported order by relation")
    return flips.pop()
