"""CassandraStore: the WideColumnStore on Apache Cassandra through cassandra-driver.

Writes are prepared ``UPDATE``/``DELETE`` statements with ``USING TIMESTAMP``
set to the mutation's version, so Cassandra's own cell reconciliation gives the
convergence rules; ``UPDATE`` writes no row marker, so a row exists exactly
while it has a live cell. The writes of one ``apply`` to one partition go as
UNLOGGED batches of at most ``max_batch_statements`` (see ``batches``). All
statements and batches are marked idempotent.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from framework.core.mutations import CellValue, Mutation
from framework.core.rows import Row
from framework.core.schema import Column, SchemaError, TableSchema
from stores.base import WideColumnStore
from stores.cassandra import statements as cql
from stores.cassandra.batches import MAX_BATCH_STATEMENTS, requests
from stores.cassandra.bridge import Page, execute
from stores.cassandra.error_map import reraise
from stores.cassandra.existing import (
    columns_to_add,
    refreshed_metadata,
    schema_from_metadata,
    table_metadata,
)
from stores.cassandra.plan import Planned, decode_row, plan_mutation, plan_partition, plan_read_row, plan_scan
from stores.cassandra.tokens import shard_range
from stores.cassandra.url import parse_url
from stores.errors import PermanentStoreError, StoreClosed, StoreError
from stores.evolution import added_columns

__all__ = ["CassandraStore"]


class CassandraStore(WideColumnStore):
    """Rows of declared tables in one keyspace, written and read at one consistency level."""

    def __init__(
        self,
        session: Any,
        keyspace: str,
        *,
        consistency: int = ConsistencyLevel.LOCAL_QUORUM,
        max_concurrency: int = 64,
        max_batch_statements: int = 100,
        request_timeout: float = 10.0,
        ddl_timeout: float = 60.0,
        fetch_size: int = 1000,
        cluster: Any | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Use an open ``session``; ``cluster``, when given, is owned and shut down by ``close``.

        ``max_concurrency`` bounds the requests in flight; ``max_batch_statements``
        caps the writes of one partition batch (1 sends every write alone).
        """
        cql.quote(keyspace)
        if consistency not in ConsistencyLevel.value_to_name:
            raise ValueError(f"unknown consistency level {consistency!r}")
        if max_concurrency < 1 or fetch_size < 1 or request_timeout <= 0 or ddl_timeout <= 0:
            raise ValueError("max_concurrency, fetch_size and the timeouts must be positive")
        if not 1 <= max_batch_statements <= MAX_BATCH_STATEMENTS:
            raise ValueError(f"max_batch_statements must be in [1, {MAX_BATCH_STATEMENTS}]")
        self._session = session
        self._cluster = cluster
        self.keyspace = keyspace
        self.consistency = consistency
        self.request_timeout = float(request_timeout)
        self.ddl_timeout = float(ddl_timeout)
        self.fetch_size = fetch_size
        self.max_batch_statements = max_batch_statements
        self._clock = clock
        self._limit = asyncio.Semaphore(max_concurrency)
        self._schemas: dict[str, TableSchema] = {}
        self._prepared: dict[tuple[Any, ...], Any] = {}
        self._preparing: dict[tuple[Any, ...], asyncio.Future[Any]] = {}
        self._closed = False

    @classmethod
    async def connect(
        cls,
        contact_points: Sequence[str],
        keyspace: str,
        *,
        port: int = 9042,
        protocol_version: int = 4,
        local_dc: str | None = None,
        auth_provider: Any | None = None,
        connect_timeout: float = 10.0,
        create_keyspace: bool = False,
        replication_factor: int = 1,
        datacenters: Mapping[str, int] | None = None,
        **options: Any,
    ) -> CassandraStore:
        """Open a Cluster of our own (token-aware, DC-aware) and return a store that owns it."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
        from cassandra.query import tuple_factory

        cql.quote(keyspace)
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc)),
            consistency_level=options.get("consistency", ConsistencyLevel.LOCAL_QUORUM),
            request_timeout=options.get("request_timeout", 10.0),
            row_factory=tuple_factory,
        )
        cluster = Cluster(
            contact_points=list(contact_points),
            port=port,
            protocol_version=protocol_version,
            auth_provider=auth_provider,
            connect_timeout=connect_timeout,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        )
        loop = asyncio.get_running_loop()
        try:
            session = await loop.run_in_executor(None, cluster.connect)
        except Exception as exc:
            await loop.run_in_executor(None, cluster.shutdown)
            reraise(exc, f"connect to {list(contact_points)}:{port}")
        store = cls(session, keyspace, cluster=cluster, **options)
        if create_keyspace:
            try:
                await store.ensure_keyspace(replication_factor, datacenters)
            except BaseException:
                await store.close()
                raise
        return store

    @classmethod
    async def from_url(cls, url: str) -> CassandraStore:
        """Connect as ``cassandra://[user:pw@]host[:port][,host..]/keyspace[?options]`` says (see ``url``)."""
        return await cls.connect(**parse_url(url))

    # -- schema -------------------------------------------------------------------------------

    async def ensure_keyspace(
        self, replication_factor: int = 1, datacenters: Mapping[str, int] | None = None
    ) -> None:
        """``CREATE KEYSPACE IF NOT EXISTS`` (SimpleStrategy, or NetworkTopologyStrategy per DC)."""
        ddl = cql.create_keyspace(self.keyspace, replication_factor, datacenters)
        await self._ddl(ddl, f"create keyspace {self.keyspace}")

    async def ensure_table(self, schema: TableSchema) -> None:
        """Create the table if missing, or add the declared regular columns an existing one lacks
        (``ALTER TABLE .. ADD``); SchemaError for any other difference (``stores.evolution``)."""
        known = self._schemas.get(schema.name)
        if known == schema:
            return
        if known is not None:
            added_columns(known, schema)  # refused before any DDL
        await self._ddl(cql.create_table(self.keyspace, schema), f"create table {schema.name}")
        meta = table_metadata(self._session, self.keyspace, schema.name)
        if meta is not None:
            missing = columns_to_add(schema, meta)
            if missing:
                await self._add_columns(schema, missing)
        self._schemas[schema.name] = schema

    async def _add_columns(self, schema: TableSchema, columns: Sequence[Column]) -> None:
        """``ALTER TABLE .. ADD`` each column, then record the declared column order in the comment.

        When an ALTER fails because a concurrent writer added the column first, the
        refreshed table metadata decides: the column is there (go on), it has another
        type (SchemaError), or it is still missing (the error is raised).
        """
        for column in columns:
            try:
                ddl = cql.add_column(self.keyspace, schema.name, column)
                await self._ddl(ddl, f"add column {schema.name}.{column.name}")
            except PermanentStoreError:
                meta = await refreshed_metadata(self._session, self.keyspace, schema.name, self.ddl_timeout)
                if meta is None or column in columns_to_add(schema, meta):
                    raise
        await self._ddl(cql.set_column_order(self.keyspace, schema), f"comment on {schema.name}")

    def schema(self, table: str) -> TableSchema:
        """The declared schema of ``table`` (else the existing table's); SchemaError when unknown."""
        known = self._schemas.get(table)
        if known is not None:
            return known
        meta = table_metadata(self._session, self.keyspace, table) if isinstance(table, str) else None
        if meta is None:
            raise SchemaError("table", f"table {table!r} is not declared (call ensure_table)")
        schema = schema_from_metadata(meta)  # a table created earlier, e.g. before a restart
        self._schemas[table] = schema
        return schema

    # -- writes -------------------------------------------------------------------------------

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        """Validate and bind every write, then send them grouped per partition, concurrently
        (bounded); durable on return.

        Each request is one partition's UNLOGGED batch (or a lone write) and is
        bounded by ``request_timeout``. When several requests fail, a permanent
        failure is raised in preference to a transient one (retrying the batch
        could not succeed); a note says how many writes and requests failed.
        """
        planned = [plan_mutation(self.keyspace, self.schema(m.table), m) for m in mutations]
        if not planned:
            return
        bound = await asyncio.gather(*(self._bind(p) for p in planned))
        sends = requests(
            [m.table for m in mutations],
            bound,
            [p.what for p in planned],
            consistency=self.consistency,
            max_statements=self.max_batch_statements,
        )
        outcomes = await asyncio.gather(
            *(self._run(r.statement, r.what) for r in sends), return_exceptions=True
        )
        failed = [(o, r) for o, r in zip(outcomes, sends, strict=True) if isinstance(o, BaseException)]
        if not failed:
            return
        for f, _ in failed:
            if not isinstance(f, StoreError):
                raise f
        first = next((f for f, _ in failed if isinstance(f, PermanentStoreError)), failed[0][0])
        if len(failed) > 1 or failed[0][1].writes > 1:
            writes = sum(r.writes for _, r in failed)
            first.add_note(
                f"{writes} of {len(planned)} writes failed ({len(failed)} of {len(sends)} requests)"
            )
        raise first

    # -- reads --------------------------------------------------------------------------------

    async def read_row(self, table: str, key: Mapping[str, CellValue]) -> Row | None:
        """The row at the full primary ``key``; None when it has no live cell."""
        schema = self.schema(table)
        p = plan_read_row(self.keyspace, schema, key)
        if not schema.columns:
            return None
        page = await self._run(await self._bind(p), p.what)
        now = self._clock()
        for raw in page.rows:
            return decode_row(schema, raw, now, key)
        return None

    async def read_partition(
        self,
        table: str,
        partition_key: Mapping[str, CellValue],
        *,
        start: Sequence[CellValue] | None = None,
        end: Sequence[CellValue] | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[Row]:
        """Rows of one partition in clustering order (or reversed), within inclusive prefix bounds."""
        schema = self.schema(table)
        p = plan_partition(self.keyspace, schema, partition_key, start, end, limit, reverse)
        if not schema.columns:
            return []
        return [row async for row in self._pages(schema, p)]

    def scan(self, table: str, *, shard: int = 0, shards: int = 1) -> AsyncIterator[Row]:
        """Every live row whose partition token falls in shard ``shard`` of ``shards`` equal ring ranges."""
        schema = self.schema(table)
        first, last = shard_range(shard, shards)
        return self._pages(schema, plan_scan(self.keyspace, schema, first, last))

    async def _pages(self, schema: TableSchema, p: Planned) -> AsyncIterator[Row]:
        if not schema.columns:
            return
        statement = await self._bind(p)
        statement.fetch_size = self.fetch_size
        paging_state: bytes | None = None
        while True:
            page = await self._run(statement, p.what, paging_state)
            now = self._clock()
            for raw in page.rows:
                row = decode_row(schema, raw, now)
                if row is not None:
                    yield row
            if not page.paging_state:
                return
            paging_state = page.paging_state

    # -- plumbing -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Forget prepared statements; shut down the cluster when this store created it."""
        if self._closed:
            return
        self._closed = True
        self._prepared.clear()
        if self._cluster is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._cluster.shutdown)

    async def _ddl(self, ddl: cql.Cql, what: str) -> None:
        statement = SimpleStatement(ddl.text, is_idempotent=True)
        await self._run(statement, what, timeout=self.ddl_timeout)

    async def _run(
        self, statement: Any, what: str, paging_state: bytes | None = None, *, timeout: float | None = None
    ) -> Page:
        if self._closed:
            raise StoreClosed("the Cassandra store is closed")
        async with self._limit:
            return await execute(
                self._session,
                statement,
                timeout=timeout or self.request_timeout,
                what=what,
                paging_state=paging_state,
            )

    async def _bind(self, p: Planned) -> Any:
        prepared = await self._prepare(p)
        try:
            return prepared.bind(p.values)
        except (TypeError, ValueError) as exc:
            raise PermanentStoreError(f"{p.what}: cannot bind {p.values!r}: {exc}") from exc

    async def _prepare(self, p: Planned) -> Any:
        prepared = self._prepared.get(p.shape)
        if prepared is not None:
            return prepared
        pending = self._preparing.get(p.shape)
        if pending is None:
            pending = asyncio.ensure_future(self._prepare_now(p))
            self._preparing[p.shape] = pending
            pending.add_done_callback(functools.partial(self._prepared_done, p.shape))
        return await asyncio.shield(pending)

    def _prepared_done(self, shape: tuple[Any, ...], _future: asyncio.Future[Any]) -> None:
        self._preparing.pop(shape, None)  # a failed prepare is tried again by the next caller

    async def _prepare_now(self, p: Planned) -> Any:
        text = p.build().text
        loop = asyncio.get_running_loop()
        try:
            async with self._limit:
                prepared = await asyncio.wait_for(
                    loop.run_in_executor(None, self._session.prepare, text), self.request_timeout
                )
        except Exception as exc:
            reraise(exc, f"prepare {text}")
        prepared.consistency_level = self.consistency
        prepared.is_idempotent = True
        self._prepared[p.shape] = prepared
        return prepared
