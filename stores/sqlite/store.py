"""The embedded wide-column store: ``SqliteEngine`` behind the async store contract.

Every engine call runs on one dedicated worker thread (a single writer), so
concurrent coroutines never block the event loop and never interleave inside
a transaction. Concurrent ``apply`` calls are group-committed: all that wait
together share one durable transaction (one fsync), and each returns once that
commit is on disk. When one batch of a group is invalid, nothing of the group
is written and each batch is applied on its own, so only the bad one fails.
SQLite errors become (``stores.sqlite.error_map.map_error``) ``TransientStoreError`` (locked, I/O) or
``PermanentStoreError``; schema and mutation errors pass through unchanged.

With ``writer="process"`` the writes go to a child process instead (``stores.sqlite.writer``),
which groups and commits them the same way; every other call stays on the thread.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from framework.core.mutations import CellValue, Mutation, MutationError
from framework.core.rows import Row
from framework.core.schema import TableSchema
from stores.base import WideColumnStore
from stores.errors import StoreClosed
from stores.sqlite.engine import ScanCursor, SqliteEngine
from stores.sqlite.error_map import map_error

if TYPE_CHECKING:
    from stores.sqlite.writer import WriterProcess

__all__ = ["SqliteStore"]

T = TypeVar("T")


class SqliteStore(WideColumnStore):
    """A ``WideColumnStore`` on one SQLite file (or ``":memory:"``).

    ``writer``: where writes run: ``"thread"`` (the store's thread, as every other call) or
    ``"process"`` (a child process of their own, ``stores.sqlite.writer``: beside the caller's
    Python rather than taking turns with it; a file path only)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        page_size: int = 500,
        writer: Literal["thread", "process"] = "thread",
    ) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive integer, got {page_size!r}")
        if writer not in ("thread", "process"):
            raise ValueError(f"writer must be 'thread' or 'process', got {writer!r}")
        self._page_size = page_size
        self._clock = clock
        self._writer: WriterProcess | None = None
        if writer == "process":
            from stores.sqlite.writer import WriterProcess  # its module is the child's entry point too

            self._writer = WriterProcess(path)
        self._group: list[tuple[list[Mutation], asyncio.Future[None], asyncio.AbstractEventLoop]] = []
        self._group_lock = threading.Lock()
        self._flush_queued = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="converge-sqlite")
        self._closed = False
        try:
            self._engine = self._executor.submit(SqliteEngine, path, clock=clock).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        page_size: int = 500,
        writer: Literal["thread", "process"] = "thread",
    ) -> SqliteStore:
        """Open the store without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, functools.partial(cls, path, clock=clock, page_size=page_size, writer=writer)
        )

    @property
    def engine(self) -> SqliteEngine:
        """The synchronous engine (call it only from the store's worker thread or while idle)."""
        return self._engine

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise StoreClosed("the SQLite store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        except sqlite3.Error as exc:
            raise map_error(exc, getattr(fn, "__name__", "call")) from exc

    async def ensure_table(self, schema: TableSchema) -> None:
        await self._call(self._engine.ensure_table, schema)
        if self._writer is not None:
            await self._writer.ensure_table(schema)

    def schema(self, table: str) -> TableSchema:
        return self._engine.schema(table)

    async def tables(self) -> list[str]:
        """Names of the declared tables."""
        return await self._call(self._engine.tables)

    async def apply(self, mutations: Sequence[Mutation]) -> None:
        batch = list(mutations)
        if self._closed:
            raise StoreClosed("the SQLite store is closed")
        if not batch:
            return
        if self._writer is not None:  # the child groups what arrives together into one commit
            await self._writer.apply(batch, int(self._clock()))
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._group_lock:
            self._group.append((batch, fut, loop))
            start = not self._flush_queued
            self._flush_queued = True
        if start:
            loop.run_in_executor(self._executor, self._flush_group)
        await fut

    def _flush_group(self) -> None:
        """Writer thread: apply every waiting batch in one transaction, then wake the callers."""
        with self._group_lock:
            group, self._group = self._group, []
            self._flush_queued = False
        if not group:
            return
        try:
            self._engine.apply([m for batch, _, _ in group for m in batch])
        except MutationError:
            # a bad batch in the group (nothing was written): apply each on its own so it fails alone
            for batch, fut, loop in group:
                loop.call_soon_threadsafe(_settle, fut, self._apply_one(batch))
            return
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            error = map_error(exc, "apply")
            for _, fut, loop in group:
                loop.call_soon_threadsafe(_settle, fut, error)
            return
        for _, fut, loop in group:
            loop.call_soon_threadsafe(_settle, fut, None)

    def _apply_one(self, batch: list[Mutation]) -> BaseException | None:
        try:
            self._engine.apply(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            return map_error(exc, "apply")
        return None

    async def read_row(self, table: str, key: Mapping[str, CellValue]) -> Row | None:
        return await self._call(self._engine.read_row, table, key)

    async def read_rows(self, table: str, keys: Sequence[Mapping[str, CellValue]]) -> list[Row | None]:
        """Every row in one hop to the store's thread."""
        return await self._call(self._engine.read_rows, table, keys)

    async def read_partitions(
        self, table: str, partition_keys: Sequence[Mapping[str, CellValue]]
    ) -> list[list[Row]]:
        """Every partition in one hop to the store's thread, read by one statement per chunk."""
        return await self._call(self._engine.read_partitions, table, partition_keys)

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
        return await self._call(
            self._engine.read_partition,
            table,
            partition_key,
            start=start,
            end=end,
            limit=limit,
            reverse=reverse,
        )

    async def scan(self, table: str, *, shard: int = 0, shards: int = 1) -> AsyncIterator[Row]:
        """Every live row of shard ``shard`` of ``shards``, fetched ``page_size`` rows at a time."""
        cursor: ScanCursor | None = None
        while True:
            rows, cursor = await self._call(
                self._engine.scan_page,
                table,
                shard=shard,
                shards=shards,
                after=cursor,
                size=self._page_size,
            )
            for row in rows:
                yield row
            if cursor is None:
                return

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            if self._writer is not None:
                await self._writer.close()
            await loop.run_in_executor(self._executor, self._engine.close)
        finally:
            self._executor.shutdown(wait=False)


def _settle(fut: asyncio.Future[None], error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
