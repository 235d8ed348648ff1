"""The CQL test server: an asyncio protocol-v4 server on a loopback port, run in a background thread.

One ``Storage`` (schema + data) and one prepared-statement cache are shared by
all connections, as on a one-node cluster. Requests of a connection are
answered in order; each response carries its request's stream id.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.cql_server import responses as r
from tests.support.cql_server import wire
from tests.support.cql_server.analyze import analyze
from tests.support.cql_server.errors import (
    CqlError,
    InvalidRequest,
    ProtocolViolation,
    ServerFault,
    Unprepared,
)
from tests.support.cql_server.execute import Executor, Request
from tests.support.cql_server.parser import parse
from tests.support.cql_server.plans import Analyzed
from tests.support.cql_server.storage import CellWrite, RowDelete, Storage
from tests.support.cql_server.system_tables import NodeInfo

__all__ = ["BatchRecord", "CqlServer"]

log = logging.getLogger(__name__)

OP_STARTUP, OP_OPTIONS, OP_QUERY, OP_PREPARE, OP_EXECUTE, OP_REGISTER, OP_BATCH = 1, 5, 7, 9, 10, 11, 13
_EVENTS = {"TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"}
_SUPPORTED = {"CQL_VERSION": ["3.4.5"], "COMPRESSION": [], "PROTOCOL_VERSIONS": ["4/v4"]}


@dataclass(frozen=True)
class _Statement:
    text: str
    keyspace: str | None
    analyzed: Analyzed


@dataclass(frozen=True)
class BatchRecord:
    """One BATCH the server applied: its type (0 logged, 1 unlogged), statement count and the
    partitions it wrote, each as (keyspace, table, partition key values)."""

    kind: int
    statements: int
    partitions: frozenset[tuple[str, str, tuple[object, ...]]]


@dataclass
class _Connection:
    keyspace: str | None = None
    ready: bool = False


class CqlServer:
    """``start()`` binds ``host`` on ``port`` (0 = a free one) and serves until ``stop()``.

    ``clock`` (epoch seconds) drives TTL expiry and default write times; tests may
    replace it at any time (``server.clock = manual_clock``). ``requests`` counts the
    requests per opcode name; ``batches`` keeps the last ``BATCH_LOG`` applied batches.
    """

    #: How many applied batches ``batches`` keeps (the oldest are dropped first).
    BATCH_LOG = 10_000

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, clock: Callable[[], float] = time.time
    ) -> None:
        self.host = host
        self.port = port
        self.storage = Storage(clock)
        self.executor = Executor(self.storage, self.node)
        self.requests: Counter[str] = Counter()
        self.batches: deque[BatchRecord] = deque(maxlen=self.BATCH_LOG)
        self._host_id = uuid.uuid4()
        self._schema_version = uuid.uuid4()
        self._prepared: dict[bytes, _Statement] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def clock(self) -> Callable[[], float]:
        return self.storage.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.storage.clock = clock

    def node(self) -> NodeInfo:
        return NodeInfo(self.host, self.port, self._host_id, self._schema_version)

    def forget_prepared(self) -> int:
        """Drop every prepared statement (as a restarted node does); returns how many there were."""
        n = len(self._prepared)
        self._prepared.clear()
        return n

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> CqlServer:
        """Start serving in a daemon thread with its own event loop; returns self once bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve, self.host, self.port)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=main, name=f"cql-test-server-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("the CQL test server did not start")
        if failure:
            raise failure[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listener and every connection, stop the loop and join the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            self.storage.close()
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()  # each handler then reads EOF and returns
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=timeout / 2)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(timeout)
        self._thread = None
        self.storage.close()

    def __enter__(self) -> CqlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connections -----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection()
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            while True:
                header = await reader.readexactly(wire.HEADER.size)
                try:
                    frame = wire.decode_header(header)
                except ProtocolViolation as exc:
                    writer.write(wire.encode_frame(0, r.OP_ERROR, r.error(exc)))
                    await writer.drain()
                    return
                body = await reader.readexactly(frame.length)
                version = frame.version & 0x7F
                if version != wire.VERSION:
                    err = ProtocolViolation(
                        f"Invalid or unsupported protocol version ({version}); supported versions are (4/v4)"
                    )
                    writer.write(wire.encode_frame(frame.stream, r.OP_ERROR, r.error(err), min(version, 4)))
                    await writer.drain()
                    return
                opcode, payload = self._answer(conn, frame, body)
                writer.write(wire.encode_frame(frame.stream, opcode, payload))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _answer(self, conn: _Connection, frame: wire.Frame, body: bytes) -> tuple[int, bytes]:
        try:
            if frame.flags & wire.FLAG_COMPRESSED:
                raise ProtocolViolation("compression was not negotiated (the server offers none)")
            if frame.flags & wire.FLAG_TRACING:
                raise ProtocolViolation("tracing is not supported by the CQL test server")
            if frame.flags & wire.FLAG_CUSTOM_PAYLOAD:
                body = wire.skip_custom_payload(body)
            return self._dispatch(conn, frame.opcode, body)
        except CqlError as exc:
            return r.OP_ERROR, r.error(exc)
        except Exception as exc:  # a server bug: answer it, keep the connection
            log.exception("CQL test server failed on opcode %#x", frame.opcode)
            return r.OP_ERROR, r.error(ServerFault(f"{type(exc).__name__}: {exc}"))

    def _dispatch(self, conn: _Connection, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == OP_OPTIONS:
            self.requests["OPTIONS"] += 1
            return r.OP_SUPPORTED, r.supported(_SUPPORTED)
        if opcode == OP_STARTUP:
            self.requests["STARTUP"] += 1
            options = wire.read_startup(body)
            if not options.get("CQL_VERSION", "3").startswith("3"):
                raise ProtocolViolation(f"unsupported CQL_VERSION {options['CQL_VERSION']}")
            if options.get("COMPRESSION"):
                raise ProtocolViolation(f"unsupported compression {options['COMPRESSION']}")
            conn.ready = True
            return r.OP_READY, b""
        if not conn.ready:
            raise ProtocolViolation(f"opcode {opcode:#x} before STARTUP")
        if opcode == OP_REGISTER:
            self.requests["REGISTER"] += 1
            unknown = set(wire.read_register(body)) - _EVENTS
            if unknown:
                raise ProtocolViolation(f"unknown event types {sorted(unknown)}")
            return r.OP_READY, b""
        if opcode == OP_QUERY:
            self.requests["QUERY"] += 1
            q = wire.read_query(body)
            return self._run(conn, self._analyze(q.text, conn.keyspace), q.options)
        if opcode == OP_PREPARE:
            self.requests["PREPARE"] += 1
            return r.OP_RESULT, self._prepare(wire.read_prepare(body), conn.keyspace).body()
        if opcode == OP_EXECUTE:
            self.requests["EXECUTE"] += 1
            e = wire.read_execute(body)
            return self._run(conn, self._lookup(e.query_id).analyzed, e.options)
        if opcode == OP_BATCH:
            self.requests["BATCH"] += 1
            self._batch(conn, wire.read_batch(body))
            return r.OP_RESULT, r.Void().body()
        raise ProtocolViolation(f"unsupported opcode {opcode:#x}")

    # -- statements ------------------------------------------------------------------------

    def _analyze(self, text: str, keyspace: str | None) -> Analyzed:
        stmt, markers = parse(text)
        return analyze(stmt, markers, self.storage.catalog, keyspace)

    def _prepare(self, text: str, keyspace: str | None) -> r.Prepared:
        query_id = hashlib.md5(((keyspace or "") + text).encode(), usedforsecurity=False).digest()
        found = self._prepared.get(query_id)
        if found is None:
            found = self._prepared[query_id] = _Statement(text, keyspace, self._analyze(text, keyspace))
        a = found.analyzed
        return r.Prepared(query_id, a.binds, a.pk_indexes, a.result)

    def _lookup(self, query_id: bytes) -> _Statement:
        found = self._prepared.get(query_id)
        if found is None:
            raise Unprepared(query_id)
        return found

    def _run(self, conn: _Connection, analyzed: Analyzed, opts: wire.QueryOptions) -> tuple[int, bytes]:
        req = Request(opts.values, opts.timestamp, opts.page_size, opts.paging_state, opts.skip_metadata)
        result, keyspace = self.executor.run(analyzed, req)
        if keyspace is not None:
            conn.keyspace = keyspace
        return r.OP_RESULT, result.body()

    def _batch(self, conn: _Connection, batch: wire.BatchRequest) -> None:
        if batch.kind == 2:
            raise InvalidRequest("COUNTER batches are not supported by the CQL test server")
        writes: list[CellWrite | RowDelete] = []
        for text, query_id, values in batch.items:
            analyzed = (
                self._analyze(text, conn.keyspace)
                if text is not None
                else self._lookup(query_id or b"").analyzed
            )
            writes += self.executor.writes(analyzed, values, batch.timestamp)
        self.storage.apply(writes)
        partitions = frozenset(
            (w.table.keyspace, w.table.name, tuple(w.key[c] for c in w.table.partition_key)) for w in writes
        )
        self.batches.append(BatchRecord(batch.kind, len(batch.items), partitions))
