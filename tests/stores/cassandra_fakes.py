"""A stand-in for a Cassandra session, built from the driver's own objects (no server exists here).

No Cassandra server can run on this machine, so the Cassandra store is tested
with a session that answers in-process but uses the real driver machinery
wherever it can:

- ``prepare`` returns a real ``cassandra.query.PreparedStatement`` made by
  ``PreparedStatement.from_message`` with the bind metadata a server would
  send (derived here, independently of the store, by reading the CQL text:
  ``USING TIMESTAMP ?`` is a ``[timestamp]`` bigint, ``token(..) >= ?`` a
  ``partition key token`` bigint, ``"col" = ?`` the column's type, ...);
- ``execute_async`` returns a real ``cassandra.cluster.ResponseFuture`` and
  completes it from another thread (as the driver's IO thread does) by
  feeding it a real protocol message (a RESULT, or an ERROR such as
  ``WriteTimeoutErrorMessage``), so the driver's result handling, retry
  policy and callbacks run for real.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cassandra import cqltypes
from cassandra.cluster import ResponseFuture
from cassandra.metadata import Metadata
from cassandra.policies import FallthroughRetryPolicy, RetryPolicy
from cassandra.protocol import (
    RESULT_KIND_ROWS,
    RESULT_KIND_VOID,
    ColumnMetadata,
    ResultMessage,
)
from cassandra.query import BatchStatement, PreparedStatement, named_tuple_factory

from framework.core.schema import TableSchema

CQL_TYPES: dict[str, type] = {
    "text": cqltypes.UTF8Type,
    "bigint": cqltypes.LongType,
    "int": cqltypes.Int32Type,
    "double": cqltypes.DoubleType,
    "boolean": cqltypes.BooleanType,
    "blob": cqltypes.BytesType,
}

_TABLE = re.compile(r'(?:UPDATE|FROM|INTO) "(\w+)"\."(\w+)"')
_MARKER = re.compile(
    r"(?P<special>TIMESTAMP|TTL|LIMIT) \?"
    r"|token\([^)]*\) (?:>=|<=|>|<) \?"
    r"|\((?P<cols>\"\w+\"(?:, \"\w+\")*)\) (?:>=|<=|>|<|=) \((?P<qs>\?(?:, \?)*)\)"
    r"|\"(?P<col>\w+)\" (?:=|>=|<=|>|<) \?"
)
_SPECIAL = {"TIMESTAMP": ("[timestamp]", cqltypes.LongType), "TTL": ("[ttl]", cqltypes.Int32Type)}
_SPECIAL["LIMIT"] = ("[limit]", cqltypes.Int32Type)


def bind_metadata(
    text: str, schemas: dict[str, TableSchema]
) -> tuple[list[ColumnMetadata], list[int] | None]:
    """The bind variables a server reports for ``text``, and its partition key indexes."""
    m = _TABLE.search(text)
    assert m, text
    ks, table = m.groups()
    schema = schemas[table]
    specs: list[ColumnMetadata] = []
    for hit in _MARKER.finditer(text):
        if hit.group("special"):
            name, typ = _SPECIAL[hit.group("special")]
            specs.append(ColumnMetadata(ks, table, name, typ))
        elif hit.group("cols"):
            cols = re.findall(r'"(\w+)"', hit.group("cols"))
            assert len(cols) == hit.group("qs").count("?"), text
            specs += [ColumnMetadata(ks, table, c, CQL_TYPES[schema.column(c).type]) for c in cols]
        elif hit.group("col"):
            c = hit.group("col")
            specs.append(ColumnMetadata(ks, table, c, CQL_TYPES[schema.column(c).type]))
        else:
            specs.append(ColumnMetadata(ks, table, "partition key token", cqltypes.LongType))
    assert len(specs) == text.count("?"), (text, specs)
    names = [s.name for s in specs]
    pk = [c.name for c in schema.partition_key]
    eq_cols = [s.name for s in specs if f'"{s.name}" = ?' in text]
    pk_indexes = [names.index(c) for c in pk] if all(c in eq_cols for c in pk) else None
    return specs, pk_indexes


def decode(prepared_or_bound: Any) -> list[Any]:
    """Deserialise a BoundStatement's values with the types of its prepared metadata."""
    meta = prepared_or_bound.prepared_statement.column_metadata
    proto = prepared_or_bound.prepared_statement.protocol_version
    return [
        None if raw is None else spec.type.from_binary(raw, proto)
        for raw, spec in zip(prepared_or_bound.values, meta, strict=True)
    ]


def written(session: FakeSession, statement: Any) -> list[tuple[str, list[Any]]]:
    """(CQL text, decoded values) of each write in a bound statement or a batch of them."""
    return [(b.prepared_statement.query_string, decode(b)) for b in _bounds(session, statement)]


def bound_columns(session: FakeSession, statement: Any) -> list[dict[str, Any]]:
    """Each write of a bound statement or batch as {bind marker name: decoded value}."""
    return [
        {
            spec.name: value
            for spec, value in zip(b.prepared_statement.column_metadata, decode(b), strict=True)
        }
        for b in _bounds(session, statement)
    ]


def _bounds(session: FakeSession, statement: Any) -> list[Any]:
    if not isinstance(statement, BatchStatement):
        return [statement]
    out = []
    for is_prepared, query_id, values in statement._statements_and_parameters:
        assert is_prepared, "the store batches bound statements only"
        out.append(_Bound(session.by_id[query_id], values))
    return out


@dataclass
class _Bound:
    prepared_statement: PreparedStatement
    values: list[bytes | None]


def rows_result(
    names: Sequence[str], rows: Sequence[Sequence[Any]], paging_state: bytes | None = None
) -> ResultMessage:
    """A ROWS result message as the protocol decoder would produce it."""
    msg = ResultMessage(RESULT_KIND_ROWS)
    msg.column_names = list(names)
    msg.column_types = [cqltypes.UTF8Type] * len(names)
    msg.parsed_rows = [tuple(r) for r in rows]
    msg.paging_state = paging_state
    return msg


def void_result() -> ResultMessage:
    return ResultMessage(RESULT_KIND_VOID)


@dataclass
class Call:
    """One ``execute_async`` call as the store made it."""

    statement: Any
    timeout: Any
    paging_state: bytes | None


class _Connection:
    def defunct(self, exc: BaseException) -> None:
        pass


class _NoHosts:
    def make_query_plan(self, keyspace: Any, query: Any) -> list[Any]:
        return []


@dataclass
class _Cluster:
    metadata: Metadata = field(default_factory=Metadata)
    _default_load_balancing_policy: Any = field(default_factory=_NoHosts)


#: Answers a call (DDL is answered by the session itself): a protocol message (RESULT or ERROR),
#: an exception, or None to never answer.
Responder = Callable[[Call], Any]


class FakeSession:
    """Prepares real PreparedStatements and completes real ResponseFutures from an IO thread."""

    keyspace = None

    def __init__(
        self,
        schemas: dict[str, TableSchema],
        responder: Responder | None = None,
        *,
        protocol_version: int = 4,
        row_factory: Callable[..., Any] = named_tuple_factory,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.schemas = schemas
        self.responder = responder or (lambda call: void_result())
        self.protocol_version = protocol_version
        self.row_factory = row_factory
        self.retry_policy = retry_policy or FallthroughRetryPolicy()
        self.cluster = _Cluster()
        self._pools: dict[Any, Any] = {}
        self.prepared: list[str] = []
        self.by_id: dict[bytes, PreparedStatement] = {}
        self.calls: list[Call] = []
        self.io_threads: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._io = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fake-cassandra-io")

    def prepare(self, query: str, custom_payload: Any = None, keyspace: Any = None) -> PreparedStatement:
        self.prepared.append(query)
        specs, pk_indexes = bind_metadata(query, self.schemas)
        query_id = b"id-%d" % len(self.prepared)
        prepared = self.by_id[query_id] = PreparedStatement.from_message(
            query_id, specs, pk_indexes, self.cluster.metadata, query, None, self.protocol_version, [], None,
        )  # fmt: skip
        return prepared

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._io.submit(fn, *args, **kwargs)

    def execute_async(
        self, query: Any, parameters: Any = None, *, timeout: Any = None, paging_state: bytes | None = None
    ) -> ResponseFuture:
        """Like ``Session.execute_async`` (the arguments the store uses)."""
        call = Call(query, timeout, paging_state)
        with self._lock:
            self.calls.append(call)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        future = ResponseFuture(self, message=None, query=query, timeout=None, retry_policy=self.retry_policy)
        self._io.submit(self._answer, future, call)
        return future

    def _answer(self, future: ResponseFuture, call: Call) -> None:
        self.io_threads.add(threading.current_thread().name)
        try:
            ddl = getattr(call.statement, "query_string", "").startswith("CREATE ")
            answer = void_result() if ddl else self.responder(call)
        except BaseException as exc:  # noqa: BLE001 - handed to the future like an IO error
            answer = exc
        finally:
            with self._lock:
                self.in_flight -= 1
        if answer is None:
            return
        future._connection = _Connection()  # the driver marks a connection defunct on connection errors
        future._set_result("127.0.0.1:9042", None, None, answer)

    def shutdown(self) -> None:
        self._io.shutdown(wait=True, cancel_futures=True)
