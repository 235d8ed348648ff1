"""The join state of a worker: entry tables, the entry feed, one join processor per agent.

``JoinWiring`` is what ``framework.worker.wiring`` adds for an app whose agents
declare lookups: the topics to create (every lookup topic, one changelog per
agent with lookups), the entry tables and join books in RocksDB under
``<data dir>/joins``, the feed started and caught up before the agents
consume, and each partition's join state restored on assignment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from faust.types import TP

from framework.core.app_model import AppModel
from framework.core.lookup import Lookup
from framework.runtime.agent import KeyedAgent
from framework.runtime.work import Work
from framework.state.changelog import KafkaChangelog, changelog_topic
from framework.state.entries import EntryTables
from framework.state.feed import EntryFeed
from framework.state.join import JoinBook, JoinConfig
from framework.state.kv import RocksKV
from framework.state.processor import JoinProcessor

if TYPE_CHECKING:
    from framework.runtime.binding import AgentRuntime
    from framework.settings import Settings

__all__ = ["JoinWiring", "JoiningApp"]

log = logging.getLogger(__name__)
_RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


class JoiningApp(AppModel, Protocol):
    """An ``AppModel`` whose agents read lookups, with the bounds of its joins."""

    @property
    def agents(self) -> Sequence[KeyedAgent]: ...

    @property
    def lookups(self) -> Sequence[Lookup]: ...

    @property
    def joins(self) -> JoinConfig: ...

    def agent(self, name: str) -> KeyedAgent: ...


class JoinWiring:
    """Join state of one worker (see the module docstring)."""

    def __init__(self, app: JoiningApp, worker: Any, settings: Settings, report_every: float = 60.0) -> None:
        self.app, self.worker, self.settings = app, worker, settings
        self.root = settings.data_dir / "joins"
        self.changelogs = {
            a.name: worker.topic(changelog_topic(app.name, a.name), **_RAW) for a in app.agents if a.lookups
        }
        self.processors: dict[str, JoinProcessor] = {}
        self.tables: EntryTables | None = None
        self.feed: EntryFeed | None = None
        self._feed_task: asyncio.Task[None] | None = None
        self._kvs: list[RocksKV] = []
        worker.on_partitions_assigned.connect(self._assigned)
        worker.on_partitions_revoked.connect(self._revoked)

        @worker.timer(report_every, name="converge.joins.report")
        async def report() -> None:
            self.report_overdue()

    def topics(self) -> dict[str, int]:
        """Topics to create: every lookup topic and every changelog."""
        out = {lk.topic: self.settings.partitions for lk in self.app.lookups}
        out.update({t.get_topic_name(): self.settings.partitions for t in self.changelogs.values()})
        return out

    async def open(self) -> None:
        """Open the entry tables and read every lookup topic up to its current end."""
        kv = RocksKV(self.root / "entries")
        self._kvs.append(kv)
        self.tables = EntryTables(self.app.lookups, kv)
        self.feed = EntryFeed(self.settings.broker, self.tables, self._changed)
        await self.feed.start()
        n = await self.feed.catch_up()
        log.info("lookups: read %d entry events in %.3fs", n, self.feed.caught_up_s or 0.0)

    def processor(
        self, agent: Any, sinks: Any, timeout: float, projections: Any, runtime: AgentRuntime
    ) -> JoinProcessor:
        """The join processor of ``agent``, parking through ``runtime``."""
        assert self.tables is not None
        kv = RocksKV(self.root / agent.name)
        self._kvs.append(kv)
        book = JoinBook(agent, kv, self.tables.get, projections, self.app.joins)
        changelog = KafkaChangelog(self.changelogs[agent.name], self.settings.broker)

        async def park(partition: int, event: Any, raw: str, exc: Any) -> None:
            key = event.ordering_key.encode()
            work = Work(TP(agent.topic, partition), -1, key, raw.encode(), event=event)
            await runtime._park(work, exc)  # noqa: SLF001 - the runtime's own parking path

        processor = JoinProcessor(agent, sinks, book, timeout, park=park, changelog=changelog)
        self.processors[agent.name] = processor
        return processor

    def start_feed(self) -> None:
        """Keep reading the lookup topics in the background."""
        if self.feed is not None and self._feed_task is None:
            self._feed_task = asyncio.ensure_future(self.feed.run())

    async def _changed(self, changed: list[tuple[str, str]]) -> None:
        for processor in list(self.processors.values()):
            await processor.remap(changed)

    def _assigned(self, sender: Any, assigned: set[Any], **kwargs: Any) -> None:
        for name, processor in self.processors.items():
            topic = self.app.agent(name).topic
            processor.assign(tp.partition for tp in assigned if tp.topic == topic)
            for tp in assigned:
                if tp.topic == topic:
                    processor._spawn(processor.ready(tp.partition))  # noqa: SLF001 - restore now

    def _revoked(self, sender: Any, revoked: set[Any], **kwargs: Any) -> None:
        for name, processor in self.processors.items():
            topic = self.app.agent(name).topic
            processor.revoke(tp.partition for tp in revoked if tp.topic == topic)

    def report_overdue(self) -> None:
        """Log every lookup with events pending past ``report_after_s``."""
        for name, processor in self.processors.items():
            for lookup, s in processor.status()["lookups"].items():
                if s["overdue"]:
                    log.error("%s: %d events wait for lookup %s entries for more than %.0fs "
                              "(oldest %.0fs)", name, s["overdue"], lookup, self.app.joins.report_after_s,
                              s["oldest_s"])  # fmt: skip

    def status(self) -> dict[str, Any]:
        """Entries per lookup and each agent's join status."""
        out: dict[str, Any] = {"agents": {n: p.status() for n, p in self.processors.items()}}
        if self.tables is not None:
            out["entries_applied"] = self.tables.applied
            out["caught_up_s"] = self.feed.caught_up_s if self.feed is not None else None
        return out

    async def close(self) -> None:
        if self._feed_task is not None:
            self._feed_task.cancel()
            await asyncio.gather(self._feed_task, return_exceptions=True)
        for processor in self.processors.values():
            await processor.close()
        if self.feed is not None:
            await self.feed.stop()
        for kv in self._kvs:
            kv.close()
        self._kvs.clear()
