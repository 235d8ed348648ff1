"""Run analysed statements against the storage: bind values, write, read, page and encode rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra import cqltypes

from framework.core.mutations import CellValue
from framework.core.rows import Row
from stores.sqlite.keycodec import encode_key
from tests.support.cql_server import ast
from tests.support.cql_server.catalog import MAX_TTL, TableDef
from tests.support.cql_server.errors import InvalidRequest
from tests.support.cql_server.paging import Position, descending, paginate
from tests.support.cql_server.plans import Analyzed, Bound, SelectPlan, SystemPlan, WritePlan
from tests.support.cql_server.responses import Result, Rows, SchemaChange, SetKeyspace, Void
from tests.support.cql_server.storage import CellWrite, RowDelete, Storage
from tests.support.cql_server.system_tables import NodeInfo
from tests.support.cql_server.wire import UNSET, Value

__all__ = ["Request", "Executor"]

_OPS: dict[str, Callable[[int, int], bool]] = {
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
}  # fmt: skip


@dataclass(frozen=True)
class Request:
    """One execution's inputs: raw bound values, the client's default timestamp, paging."""

    values: Sequence[Value] = ()
    timestamp: int | None = None
    page_size: int | None = None
    paging_state: bytes | None = None
    skip_metadata: bool = False


class _Values:
    """Bound values decoded with the markers' types; ``Const`` terms are already typed."""

    def __init__(self, analyzed: Analyzed, raw: Sequence[Value]) -> None:
        if len(raw) != len(analyzed.binds):
            raise InvalidRequest(
                f"There were {len(analyzed.binds)} markers(?) in CQL but {len(raw)} bound variables"
            )
        self.values: list[Any] = []
        for spec, value in zip(analyzed.binds, raw, strict=True):
            if value is None or value is UNSET:
                self.values.append(value)
                continue
            try:
                self.values.append(spec.cqltype.from_binary(value, 4))
            except Exception as exc:
                raise InvalidRequest(
                    f"Invalid value for {spec.name} of type {spec.cqltype.typename}: {exc}"
                ) from exc

    def __call__(self, term: Bound) -> Any:
        return self.values[term.index] if isinstance(term, ast.Marker) else term.value

    def required(self, term: Bound, what: str) -> Any:
        value = self(term)
        if value is None or value is UNSET:
            raise InvalidRequest(f"Invalid {'unset' if value is UNSET else 'null'} value for {what}")
        return value


class Executor:
    """Runs statements on ``storage``; ``node`` describes the server for ``system.local``."""

    def __init__(self, storage: Storage, node: Callable[[], NodeInfo]) -> None:
        self.storage = storage
        self.node = node

    def run(self, analyzed: Analyzed, req: Request) -> tuple[Result, str | None]:
        """The result, and the new keyspace of the connection after ``USE`` (else None)."""
        plan = analyzed.plan
        values = _Values(analyzed, req.values)
        if isinstance(plan, ast.Use):
            return SetKeyspace(self.storage.catalog.keyspace(plan.keyspace).name), plan.keyspace
        if isinstance(plan, ast.CreateKeyspace):
            created = self.storage.create_keyspace(plan)
            return (SchemaChange("CREATED", "KEYSPACE", plan.name) if created else Void()), None
        if isinstance(plan, tuple):
            keyspace, stmt = plan
            if isinstance(stmt, ast.AlterTable):
                altered = self.storage.alter_table(keyspace, stmt)
                return SchemaChange("UPDATED", "TABLE", keyspace, altered.name), None
            table = self.storage.create_table(keyspace, stmt)
            return (SchemaChange("CREATED", "TABLE", keyspace, table.name) if table else Void()), None
        if isinstance(plan, WritePlan):
            self.storage.apply(self._writes(plan, values, req.timestamp))
            return Void(), None
        if isinstance(plan, SelectPlan):
            return self._select(plan, analyzed, values, req), None
        return self._system(plan, analyzed, values, req), None

    def writes(
        self, analyzed: Analyzed, raw: Sequence[Value], timestamp: int | None
    ) -> list[CellWrite | RowDelete]:
        """The writes of one BATCH item; InvalidRequest unless it is an UPDATE or DELETE."""
        if not isinstance(analyzed.plan, WritePlan):
            raise InvalidRequest("Invalid statement in batch: only UPDATE and DELETE statements are allowed")
        return self._writes(analyzed.plan, _Values(analyzed, raw), timestamp)

    # -- writes ----------------------------------------------------------------------------

    def _writes(
        self, plan: WritePlan, values: _Values, default_ts: int | None
    ) -> list[CellWrite | RowDelete]:
        tb = plan.table
        key = {c: values.required(b, f"column {c}") for c, b in plan.key.items()}
        if len(tb.partition_key) == 1 and key[tb.partition_key[0]] in ("", b""):
            raise InvalidRequest("Key may not be empty")
        ts: Any = UNSET if plan.timestamp is None else values(plan.timestamp)
        if ts is None:
            raise InvalidRequest("Invalid null value of timestamp")
        if ts is UNSET:
            ts = default_ts if default_ts is not None else int(self.storage.now() * 1_000_000)
        if plan.delete:
            return [RowDelete(tb, key, ts, plan.columns)]
        cells = {c: values(b) for c, b in plan.cells.items()}
        cells = {c: v for c, v in cells.items() if v is not UNSET}
        return [CellWrite(tb, key, cells, ts, self._ttl(plan, values))] if cells else []

    @staticmethod
    def _ttl(plan: WritePlan, values: _Values) -> int | None:
        """Cassandra's TTL rules: unset = the table default, null or 0 = no TTL (even over a default)."""
        ttl: Any = UNSET if plan.ttl is None else values(plan.ttl)
        if ttl is UNSET:
            return plan.table.default_ttl or None
        if ttl is None:
            return None
        if ttl < 0:
            raise InvalidRequest(f"A TTL must be greater or equal to 0, but was {ttl}")
        if ttl > MAX_TTL:
            raise InvalidRequest(f"ttl is too large. requested ({ttl}) maximum ({MAX_TTL})")
        return ttl or None

    # -- reads -----------------------------------------------------------------------------

    @staticmethod
    def _limit(limit: Bound | None, values: _Values) -> int | None:
        value = None if limit is None else values(limit)
        if value is None or value is UNSET:
            return None
        if value <= 0:
            raise InvalidRequest("LIMIT must be strictly positive")
        return int(value)

    def _select(self, plan: SelectPlan, analyzed: Analyzed, values: _Values, req: Request) -> Rows:
        tb = plan.table
        schema = tb.engine_schema()

        def clustering(row: Row, desc: bool) -> bytes:
            raw = encode_key(schema.clustering_key, [row.key[c] for c in tb.clustering_key])
            return descending(raw) if desc else raw

        items: list[tuple[Position, Row]] = []
        if plan.mode == "scan":
            bounds = [(_OPS[op], values.required(b, "the partition key token")) for op, b in plan.tokens]
            desc = tb.clustering_order == "DESC"
            for tr in self.storage.scan(tb):
                if all(op(tr.token, bound) for op, bound in bounds):
                    items.append(((tr.token, tr.routing_key, clustering(tr.row, desc)), tr.row))
        else:
            key = {c: values.required(b, f"column {c}") for c, b in plan.key.items()}
            if plan.mode == "row":
                found = self.storage.read_row(tb, key)
                items = [] if found is None else [((0, b"", b""), found)]
            else:
                prefix = [values.required(b, "a clustering key part") for b in plan.prefix]
                start = prefix or [values.required(b, "a clustering bound") for b in plan.start]
                end = prefix or [values.required(b, "a clustering bound") for b in plan.end]
                rows = self.storage.read_partition(tb, key, start or None, end or None, plan.reverse)
                desc = (tb.clustering_order == "DESC") != plan.reverse
                items = [((0, b"", clustering(r, desc)), r) for r in rows]
        page, state = paginate(items, req.page_size, req.paging_state, self._limit(plan.limit, values))
        now = int(self.storage.now())
        encoded = tuple(
            tuple(_cell(tb, row, kind, column, now) for kind, column in plan.selection) for row in page
        )
        return Rows(analyzed.result, encoded, state, req.skip_metadata)

    def _system(self, plan: SystemPlan, analyzed: Analyzed, values: _Values, req: Request) -> Rows:
        filters = [(column, values.required(b, f"column {column}")) for column, b in plan.filters]
        rows = [
            r
            for r in plan.table.rows(self.storage.catalog, self.node(), dict(filters))
            if all(r.get(c) == v for c, v in filters)
        ]
        items = [((i, b"", b""), r) for i, r in enumerate(rows)]
        page, state = paginate(items, req.page_size, req.paging_state, self._limit(plan.limit, values))
        types: dict[str, Any] = dict(plan.table.columns)
        encoded = tuple(
            tuple(None if r.get(c) is None else types[c].to_binary(r[c], 4) for c in plan.columns)
            for r in page
        )
        return Rows(analyzed.result, encoded, state, req.skip_metadata)


def _cell(tb: TableDef, row: Row, kind: str, column: str, now: int) -> bytes | None:
    """One selected value of ``row``: a column's value, or a regular cell's WRITETIME or TTL."""
    if kind == "column" and column in tb.key_columns:
        return tb.cqltype(column).to_binary(row.key[column], 4)
    cell = row.cells.get(column)
    if cell is None:
        return None
    if kind == "column":
        value: CellValue = cell.value
        return tb.cqltype(column).to_binary(value, 4)
    if kind == "writetime":
        return cqltypes.LongType.to_binary(cell.writetime, 4)
    if cell.expires_at is None:
        return None
    return cqltypes.Int32Type.to_binary(max(1, cell.expires_at - now), 4)
