"""One member of ``tests.state.join_app``'s children agent, run the way the worker runs it.

``Member``: a ``JoinProcessor`` with its join book in a real RocksDB under its
own data dir, its own entry table, the store sink over a SQLite store,
micro-batches through ``run_batch`` and a ``KeyedScheduler``, and the join
changelog on a real noida-db topic read back by ``KafkaChangelog``. Only the
sending differs from the worker: a plain aiokafka producer (``ProducerTopic``)
stands in for the Faust app's topic, which needs a running Faust app.
``assign``/``revoke`` do what ``AgentRuntime`` and ``JoinWiring`` do on a
rebalance.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from framework import Event
from framework.runtime.backoff import BackoffConfig
from framework.runtime.batch import run_batch
from framework.runtime.errors import MessageError
from framework.runtime.scheduler import KeyedScheduler, SchedulerConfig
from framework.runtime.sinks import Sink, WideColumnSink
from framework.runtime.work import Work
from framework.state.changelog import KafkaChangelog
from framework.state.entries import EntryTables
from framework.state.join import JoinBook
from framework.state.kv import KV, MemoryKV, RocksKV
from framework.state.processor import JoinProcessor
from stores.sqlite.store import SqliteStore
from tests.state.join_app import MSG, PARENT, ChildAgent, app

TOPIC = "t.children"
FAST = SchedulerConfig(
    backoff=BackoffConfig(base_delay=0.001, max_delay=0.01, down_base_delay=0.001, down_max_delay=0.01,
                          park_after=10_000),
)  # fmt: skip
#: The join processor's first re-mapping retry delay (doubling), in place of its 0.5 s default: the
#: retries still run until they pass, without the seconds of sleep (up to 240 s in a property run)
REMAP_RETRY = 0.001


class ProducerTopic:
    """The sending side of a Faust topic (``send``, ``get_topic_name``) on an aiokafka producer."""

    def __init__(self, producer: AIOKafkaProducer, name: str) -> None:
        self.producer, self.name = producer, name

    def get_topic_name(self) -> str:
        return self.name

    async def send(self, *, key: bytes, value: bytes, partition: int) -> asyncio.Future[Any]:
        return await self.producer.send(self.name, value=value, key=key, partition=partition)


async def open_store() -> SqliteStore:
    store = await SqliteStore.open(":memory:")
    for schema in (PARENT, MSG):
        await store.ensure_table(schema)
    return store


async def msg_rows(store: SqliteStore) -> dict[tuple[str, str], tuple[dict, int]]:
    return {(r.key["parent"], r.key["msg_id"]): (r.values(), r.version) async for r in store.scan(MSG.name)}


class Member:
    """One worker's join processor for the children agent (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path | None,
        store: SqliteStore,
        changelog: KafkaChangelog | None,
        *,
        sinks: Sequence[Sink] | None = None,
    ) -> None:
        self.kv: KV = MemoryKV() if data_dir is None else RocksKV(data_dir / "joins" / "children")
        self.entries = EntryTables(app.lookups)
        self.book = JoinBook(ChildAgent(), self.kv, self.entries.get)
        sinks = sinks or [WideColumnSink(store)]
        self.processor = JoinProcessor(ChildAgent(), sinks, self.book, 5.0, changelog=changelog,
                                       park=self._remap_park, retry_delay=REMAP_RETRY)  # fmt: skip
        self.scheduler = KeyedScheduler(self.processor, self._park, config=FAST)
        self.parked: list[tuple[str, str]] = []  # (event id, stage)
        self.acked: list[tuple[int, int]] = []  # (partition, offset)

    async def _park(self, work: Work, exc: BaseException) -> None:
        event = work.event
        stage = exc.stage if isinstance(exc, MessageError) else "sink"
        self.parked.append((event.event_id if event is not None else repr(work.value), stage))

    async def _remap_park(self, p: int, event: Event, raw: str, exc: MessageError) -> None:
        self.parked.append((event.event_id, exc.stage))

    def works(self, records: Iterable[tuple[int, int, Event]]) -> list[Work]:
        """Works of ``(partition, offset, event)`` records, acking into ``acked``."""
        out = []
        for p, offset, event in records:
            work = Work((TOPIC, p), offset, event.ordering_key.encode(), event.to_json())
            work.ack = functools.partial(self.acked.append, (p, offset))
            self.processor.prepare(work)
            out.append(work)
        return out

    async def batch(self, records: Iterable[tuple[int, int, Event]]) -> None:
        """Run one micro-batch and wait for whatever went to the per-key path."""
        await run_batch(self.works(records), self.scheduler, self.processor, self._park)
        assert await self.scheduler.drain(20)

    async def feed(self, entries: Iterable[Event]) -> None:
        """Entry events read by this member's feed: apply them, map their readers again."""
        changed = [c for e in entries for c in self.entries.feed("t.parents", e)]
        await self.processor.remap(changed)
        await self.processor.settle()

    async def assign(self, partitions: Iterable[int]) -> None:
        parts = list(partitions)
        self.scheduler.assign({(TOPIC, p) for p in parts})
        self.processor.assign(parts)
        for p in parts:
            await self.processor.ready(p)
        await self.processor.settle()

    def revoke(self, partitions: Iterable[int]) -> None:
        parts = list(partitions)
        self.scheduler.revoke({(TOPIC, p) for p in parts})
        self.processor.revoke(parts)

    def state(self, p: int) -> dict[str, str]:
        """The join book's keys of partition ``p`` (records, index, pending)."""
        sep = "\x1f"
        out = {k: v for k, v in self.kv.scan(f"E{sep}{p}{sep}")}
        out |= {k: v for k, v in self.kv.scan(f"P{sep}{p}{sep}")}
        out |= {k: v for k, v in self.kv.scan("I" + sep) if k.split(sep)[3] == str(p)}
        return out

    async def close(self) -> None:
        await self.scheduler.close()
        await self.processor.close()
        self.kv.close()


class Offsets:
    """Offsets of the children topic's partitions, as a broker hands them out."""

    def __init__(self) -> None:
        self._next: dict[int, itertools.count[int]] = {}

    def __call__(self, p: int) -> int:
        return next(self._next.setdefault(p, itertools.count()))
