"""The worker's copy of the ID map: the map topic read whole into RocksDB, as a lookup's entries.

``IdMapFeed`` is what ``framework.worker.wiring`` adds for an app that declares
``id_mutation``: the map topic (``map_topic_of(app)``) is created, read from
the stored offsets (from the beginning in a fresh data dir: the topic is the
table's changelog) into ``<data dir>/idmap`` before the agents consume, then
followed in the background (``framework.state.feed.EntryFeed``). An entry
that arrives changes how later events resolve; rows written before it are
moved by the ID mutation job, not by the worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework.idmutation.declare import MutatingApp, map_topic_of
from framework.idmutation.resolution import IdMap, IdResolution, resolutions_for
from framework.state.feed import EntryFeed
from framework.state.kv import RocksKV

if TYPE_CHECKING:
    from framework.settings import Settings

__all__ = ["IdMapFeed"]

log = logging.getLogger("framework.idmutation")


class IdMapFeed:
    """The ID map of one worker (see the module docstring)."""

    def __init__(self, app: MutatingApp, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.map: IdMap | None = None
        self.feed: EntryFeed | None = None
        self._kv: RocksKV | None = None
        self._task: asyncio.Task[None] | None = None

    def topics(self) -> dict[str, int]:
        """The map topic, to create with the app's topics."""
        return {map_topic_of(self.app.name): self.settings.partitions}

    async def open(self) -> None:
        """Open the local table and read the map topic up to its current end."""
        self._kv = RocksKV(self.settings.data_dir / "idmap")
        self.map = IdMap(self.app.name, self._kv)
        self.feed = EntryFeed(self.settings.broker, self.map.tables, self._changed)
        await self.feed.start()
        n = await self.feed.catch_up()
        log.info("id map: read %d map events in %.3fs", n, self.feed.caught_up_s or 0.0)

    async def _changed(self, keys: list[tuple[str, str]]) -> None:
        assert self.map is not None
        self.map.changed(keys)

    def resolutions(self) -> Mapping[str, IdResolution]:
        """One resolution per agent writing an owner table."""
        return resolutions_for(self.app.id_mutation, self.app.agents, self.map)

    def start(self) -> None:
        """Keep reading the map topic in the background."""
        if self.feed is not None and self._task is None:
            self._task = asyncio.ensure_future(self.feed.run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.feed is not None:
            await self.feed.stop()
        if self._kv is not None:
            self._kv.close()
            self._kv = None
