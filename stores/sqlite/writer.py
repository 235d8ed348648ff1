"""The SQLite store's writes in a process of their own (``SqliteStore(writer="process")``).

A worker's process runs Python one thread at a time (the GIL): the store's thread planning,
merging and packing rows takes turns with the event loop that fetches, parses and maps, so
the two together never use more than one core. With ``writer="process"`` the store sends
each group of mutations to a child process that owns the write connection (and the row
cache): it applies them in one durable transaction, as the thread would, and answers; the
caller's write returns only then. The next group is sent while the child writes the one before
(it answers in order), so the child never waits for the caller. Reads, scans and schema reads
stay on the caller's own connection (SQLite's WAL lets them read while the child writes).

The wire is a length-prefixed ``marshal`` text of plain tuples, dicts and scalars, written and
read only by this module between two processes of the same interpreter (never event data
from elsewhere): exact for every cell value (int64 and larger integers, doubles including
-0.0 and the infinities, booleans, text, bytes). The parent has checked every mutation when
it was built; the child rebuilds them without checking again and the engine checks them
against the schema as always. An error comes back as its class (``MutationError``,
``SchemaError``, ``TransientStoreError``, ``PermanentStoreError``) and message. When the child
dies, the write in flight fails as transient and the next one starts a new child.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import marshal
import os
import select
import sqlite3
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from framework.core.mutations import Delete, LogState, Mutation, MutationError, Upsert
from framework.core.schema import SchemaError, TableSchema
from stores.errors import PermanentStoreError, StoreError, TransientStoreError
from stores.sqlite.engine import SqliteEngine, schema_from_json, schema_to_json
from stores.sqlite.error_map import map_error

__all__ = ["WriterProcess", "serve"]

log = logging.getLogger(__name__)

#: The errors that cross the wire, by name.
_ERRORS: dict[str, Callable[..., BaseException]] = {
    "MutationError": MutationError,
    "SchemaError": SchemaError,
    "TransientStoreError": TransientStoreError,
    "PermanentStoreError": PermanentStoreError,
}
_UPSERT, _DELETE = 0, 1


def _wire(m: Mutation) -> tuple[Any, ...]:
    """``m`` as plain data for the wire."""
    if type(m) is not Upsert:
        if isinstance(m, LogState):
            m = m.as_upsert()
        if isinstance(m, Delete):
            return (_DELETE, m.table, dict(m.key), m.columns, m.version)
        if not isinstance(m, Upsert):
            raise SchemaError("mutations", f"not a mutation: {type(m).__name__}")
    return (_UPSERT, m.table, dict(m.key), dict(m.cells), m.version, m.ttl)


def _mutation(wire: tuple[Any, ...]) -> Mutation:
    """The mutation ``_wire`` gave, rebuilt without its checks (it passed them when built)."""
    put = object.__setattr__
    if wire[0] == _UPSERT:
        _, table, key, cells, version, ttl = wire
        m: Mutation = object.__new__(Upsert)
        put(m, "cells", MappingProxyType(cells))
        put(m, "ttl", ttl)
    else:
        _, table, key, columns, version = wire
        m = object.__new__(Delete)
        put(m, "columns", columns)
    put(m, "table", table)
    put(m, "key", MappingProxyType(key))
    put(m, "version", version)
    return m


def _messages(fd: int) -> Iterator[list[Any]]:
    """The messages arriving on ``fd``, in groups: every message that has fully arrived by the
    time the first of a group has (at least one; blocking for it); ends when ``fd`` closes."""
    buf = bytearray()
    while True:
        group: list[Any] = []
        while True:
            while len(buf) >= 4 and len(buf) >= 4 + (size := int.from_bytes(buf[:4], "big")):
                group.append(marshal.loads(bytes(buf[4 : 4 + size])))
                del buf[: 4 + size]
            if group and not select.select([fd], [], [], 0)[0]:
                break
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                if group:
                    yield group
                return
            buf += chunk
        yield group


def _error_reply(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, MutationError):  # SchemaError among them
        return ("error", type(exc).__name__, exc.field, str(exc).removeprefix(f"{exc.field}: "))
    mapped = map_error(exc, "apply")
    if isinstance(mapped, StoreError):
        name = "TransientStoreError" if isinstance(mapped, TransientStoreError) else "PermanentStoreError"
        return ("error", name, str(mapped))
    return ("error", "PermanentStoreError", f"apply: the writer process failed: {exc!r}")


def _answer(engine: SqliteEngine, now: list[int], group: list[Any]) -> list[tuple[Any, ...]]:
    """Carry out a group of requests: consecutive applies in one transaction (each on its own
    when that fails on a bad mutation, so that only the bad one fails); the answer to each."""
    answers: list[tuple[Any, ...]] = []
    i = 0
    while i < len(group):
        if group[i][0] == "ensure":
            try:
                engine.ensure_table(schema_from_json(group[i][1]))
                answers.append(("ok",))
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
                answers.append(_error_reply(exc))
            i += 1
            continue
        j = i
        while j < len(group) and group[j][0] == "apply":
            j += 1
        applies = group[i:j]
        now[0] = max(m[1] for m in applies)
        try:
            engine.apply([_mutation(w) for m in applies for w in m[2]])
            answers += [("ok",)] * len(applies)
        except MutationError:
            for m in applies:
                now[0] = m[1]
                try:
                    engine.apply([_mutation(w) for w in m[2]])
                    answers.append(("ok",))
                except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
                    answers.append(_error_reply(exc))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            answers += [_error_reply(exc)] * len(applies)
        i = j
    return answers


#: Bytes a pipe to or from the child holds: a few groups of mutations, so the caller's event
#: loop writes a group at once instead of as the child drains 64 KiB at a time.
PIPE_BYTES = 4 << 20


def _widen(fd: int) -> None:
    """Let the pipe ``fd`` hold ``PIPE_BYTES`` (or as much as the system allows)."""
    for size in (PIPE_BYTES, int(Path("/proc/sys/fs/pipe-max-size").read_text())):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
            return
        except OSError:
            continue


def serve(path: str, inp: int, out: int) -> None:
    """The child's loop: carry out the requests arriving on file descriptor ``inp``, answering
    each on ``out`` in order, until ``inp`` closes."""
    for fd in (inp, out):
        _widen(fd)
    now = [0]
    engine = SqliteEngine(path, clock=lambda: now[0])
    try:
        for group in _messages(inp):
            reply = b""
            for answer in _answer(engine, now, group):
                body = marshal.dumps(answer)
                reply += len(body).to_bytes(4, "big") + body
            view = memoryview(reply)
            while view:
                view = view[os.write(out, view) :]
    finally:
        engine.close()


class WriterProcess:
    """The parent's end, on the caller's event loop: requests are written to the child as they
    come and its answers, which come in the same order, settle them; so the child takes the
    next group as soon as it committed one. Bound to the first loop that uses it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if self.path == ":memory:" or self.path.startswith("file:"):
            raise ValueError("a writer process needs a SQLite file path, not an in-memory database")
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting = asyncio.Lock()
        self.started = 0  # children started so far

    async def _child(self) -> asyncio.subprocess.Process:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("a SQLite writer process serves one event loop")
        async with self._starting:
            proc = self._proc
            if proc is None or proc.returncode is not None or self._reader is None or self._reader.done():
                root = str(Path(__file__).resolve().parents[2])  # the directory holding ``stores``
                paths = [root, os.environ.get("PYTHONPATH", "")]
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
                proc = self._proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "stores.sqlite.writer", self.path,
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
                )  # fmt: skip
                self._reader = asyncio.ensure_future(self._read_answers(proc))
                self.started += 1
                log.info("SQLite writer process %d started for %s", proc.pid, self.path)
            return proc

    async def _read_answers(self, proc: asyncio.subprocess.Process) -> None:
        """Settle the waiting requests with the child's answers, in order; when the child's
        output ends, fail the rest as transient (their writes may or may not be durable)."""
        assert proc.stdout is not None
        try:
            while True:
                head = await proc.stdout.readexactly(4)
                reply = marshal.loads(await proc.stdout.readexactly(int.from_bytes(head, "big")))
                fut = self._waiting.popleft()
                if fut.done():
                    continue
                if reply[0] == "ok":
                    fut.set_result(None)
                else:
                    fut.set_exception(_ERRORS[reply[1]](*reply[2:]))
        except (asyncio.IncompleteReadError, ConnectionError, IndexError) as exc:
            lost = TransientStoreError(f"apply: the SQLite writer process ended ({exc!r})")
            while self._waiting:
                fut = self._waiting.popleft()
                if not fut.done():
                    fut.set_exception(lost)
            if proc.returncode is None:
                proc.kill()

    async def _request(self, message: tuple[Any, ...]) -> None:
        proc = await self._child()
        assert proc.stdin is not None
        body = marshal.dumps(message)
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        proc.stdin.write(len(body).to_bytes(4, "big") + body)
        await fut

    async def apply(self, mutations: Sequence[Mutation], now: int) -> None:
        """Apply ``mutations`` in one durable transaction in the child (``now``: the time their
        TTLs count from); raises what the engine raised."""
        if isinstance(mutations, Upsert | Delete | LogState):
            raise SchemaError("mutations", "expected a sequence of mutations")
        await self._request(("apply", now, [_wire(m) for m in mutations]))

    async def ensure_table(self, schema: TableSchema) -> None:
        """Make the child's engine know ``schema`` (declared by the caller's engine already)."""
        await self._request(("ensure", schema_to_json(schema)))

    async def close(self) -> None:
        """Close the child's input: it finishes what it was sent, then exits."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


def main() -> None:
    """``python -m stores.sqlite.writer PATH``: serve on stdin/stdout (started by ``WriterProcess``)."""
    if len(sys.argv) != 2:
        sys.exit("usage: python -m stores.sqlite.writer PATH")
    out = os.dup(1)
    os.dup2(2, 1)  # nothing else may write to the wire
    try:
        serve(sys.argv[1], 0, out)
    except (sqlite3.Error, OSError) as exc:
        sys.exit(f"converge SQLite writer: {exc}")


if __name__ == "__main__":
    main()
