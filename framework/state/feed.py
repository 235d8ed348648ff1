"""``EntryFeed``: every worker reads every lookup's topic whole, as Kafka Streams' GlobalKTable.

A lookup's entries come from events on any partition of its topic, keyed by
anything, while its readers are partitioned by their own keys; so each
worker keeps all entries (``EntryTables`` in a local RocksDB) and reads all
partitions of every lookup topic itself (no consumer group), from the
offsets it stored, or from the beginning in a fresh data dir: the topic is
the table's changelog. ``catch_up`` reads up to the end offsets found at
the start (the worker starts consuming events after it), then ``run`` keeps
reading; every entry that changed is handed to ``on_change`` (the join
processors map its readers again). Offsets are stored after ``on_change``
returned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from framework.core.events import parse_event
from framework.runtime.fetch_pacing import pace_empty_fetches
from framework.state.entries import EntryTables

__all__ = ["EntryFeed"]

log = logging.getLogger(__name__)

OnChange = Callable[[list[tuple[str, str]]], Awaitable[None]]


class EntryFeed:
    """Reads the lookup topics into ``tables`` (see the module docstring)."""

    def __init__(
        self, broker: str, tables: EntryTables, on_change: OnChange, *, idle_backoff: float = 0.1
    ) -> None:
        """``idle_backoff``: seconds to wait after a fetch that brought nothing
        (``framework.runtime.fetch_pacing``: an idle consumer must not poll the embedded broker in
        a tight loop; 0 turns it off)."""
        self.bootstrap = broker.split("://", 1)[-1]
        self.idle_backoff = idle_backoff
        self.tables = tables
        self.on_change = on_change
        self.consumer: AIOKafkaConsumer | None = None
        self.unparsed = 0
        self.caught_up_s: float | None = None

    async def start(self) -> None:
        """Open the consumer on every partition of every lookup topic, at the stored offsets."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        self.consumer = consumer
        await consumer.start()
        pace_empty_fetches(consumer, self.idle_backoff)
        tps = []
        for topic in self.tables.topics:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                await consumer._client.force_metadata_update()  # noqa: SLF001 - a topic just created
                parts = consumer.partitions_for_topic(topic) or set()
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        for tp in tps:
            offset = self.tables.offset(tp.topic, tp.partition)
            if offset is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, offset)

    async def catch_up(self) -> int:
        """Read up to the end offsets found now; returns how many records were read."""
        consumer = self.consumer
        assert consumer is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        tps = list(consumer.assignment())
        ends = await consumer.end_offsets(tps) if tps else {}
        n = 0
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            n += await self.poll(500)
        self.caught_up_s = round(loop.time() - started, 3)
        return n

    async def poll(self, timeout_ms: int) -> int:
        """Read one batch, apply it (one write per partition's records), hand the changes on,
        store the offsets."""
        consumer = self.consumer
        assert consumer is not None
        batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=5000)
        changed: dict[tuple[str, str], None] = {}
        n = 0
        for tp, records in batch.items():
            events = []
            for r in records:
                n += 1
                try:
                    events.append(parse_event(r.value or b""))
                except Exception:  # noqa: BLE001 - the agent of the topic parks it; no entry here
                    self.unparsed += 1
            changed.update(dict.fromkeys(self.tables.feed_many(tp.topic, events)))
        if changed:
            await self.on_change(list(changed))
        for tp, records in batch.items():
            if records:
                self.tables.set_offset(tp.topic, tp.partition, records[-1].offset + 1)
        return n

    async def run(self) -> None:
        """Keep reading until cancelled."""
        while True:
            try:
                await self.poll(1000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the feed alive; the next poll retries
                log.warning("lookup feed: %r", exc)
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        if self.consumer is not None:
            await self.consumer.stop()
            self.consumer = None
