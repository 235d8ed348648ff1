"""``EntryTables``: the entries of every lookup of an app, merged by version, in one ``KV``.

Keys: ``N|lookup|key`` -> the entry's JSON; ``O|topic|partition`` -> the next
offset of the entry topic to read (the worker's feed, ``feed.EntryFeed``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Literal

from framework.core.events import Event
from framework.core.lookup import Entry, Lookup, entry_text, merge
from framework.state.kv import KV, MemoryKV

__all__ = ["EntryTables"]

log = logging.getLogger(__name__)

#: The cache's answer for a key it does not hold (its values may be None).
_MISSING: Literal[False] = False
SEP = "\x1f"


class EntryTables:
    """Lookup entries, each key keeping the entry that wins (``lookup.merge``)."""

    def __init__(self, lookups: Iterable[Lookup], kv: KV | None = None) -> None:
        self.kv: KV = kv if kv is not None else MemoryKV()
        self.lookups: dict[str, Lookup] = {}
        for lookup in lookups:
            if self.lookups.setdefault(lookup.name, lookup) is not lookup:
                raise ValueError(f"two different lookups are named {lookup.name!r}")
        self.skipped = 0
        self.applied = 0
        self._cache: dict[tuple[str, str], Entry | None] = {}

    def on(self, topic: str) -> list[Lookup]:
        """The lookups fed by ``topic``."""
        return [lk for lk in self.lookups.values() if lk.topic == topic]

    @property
    def topics(self) -> Sequence[str]:
        return sorted({lk.topic for lk in self.lookups.values()})

    def get(self, lookup: str, key: str) -> Entry | None:
        """The entry ``key`` of ``lookup``; None when none arrived."""
        cached = self._cache.get((lookup, key), _MISSING)
        if cached is not False:
            return cached
        text = self.kv.get(f"N{SEP}{lookup}{SEP}{key}")
        entry = None if text is None else Entry.from_json(text)
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[(lookup, key)] = entry
        return entry

    def put(self, lookup: str, key: str, entry: Entry) -> bool:
        """Merge ``entry`` into ``lookup``'s key; True when the stored entry changed."""
        old = self.get(lookup, key)
        won = merge(old, entry)
        if won is old:
            return False
        self.kv.put(f"N{SEP}{lookup}{SEP}{key}", won.to_json())
        self._cache[(lookup, key)] = won
        self.applied += 1
        return True

    def feed(self, topic: str, event: Event) -> list[tuple[str, str]]:
        """Apply the entries ``event`` (from ``topic``) carries; the ``(lookup, key)`` that changed."""
        return self.feed_many(topic, [event])

    def feed_many(self, topic: str, events: Iterable[Event]) -> list[tuple[str, str]]:
        """``feed`` for many events of ``topic`` (merged in memory, written in one batch); the
        ``(lookup, key)`` whose stored entry changed."""
        lookups = self.on(topic)
        won: dict[tuple[str, str], tuple[Entry, str]] = {}
        for event in events:
            for lookup in lookups:
                try:
                    found = entry_text(lookup, event)
                except Exception as exc:  # noqa: BLE001 - an event that carries no valid entry is skipped
                    self.skipped += 1
                    log.warning("lookup %s: %s carries no valid entry: %r", lookup.name, event.event_id, exc)
                    continue
                if found is None:
                    continue
                key, entry, text = found
                current = won.get((lookup.name, key))
                old = self.get(lookup.name, key) if current is None else current[0]
                if merge(old, entry) is not old:
                    won[(lookup.name, key)] = (entry, text)
        if won:
            self.kv.put_many((f"N{SEP}{lk}{SEP}{key}", text) for (lk, key), (_, text) in won.items())
            for name_key, (entry, _) in won.items():
                self._cache[name_key] = entry
            self.applied += len(won)
        return list(won)

    def offset(self, topic: str, partition: int) -> int | None:
        """The next offset of ``topic``'s ``partition`` to read (None: from the beginning)."""
        text = self.kv.get(f"O{SEP}{topic}{SEP}{partition}")
        return None if text is None else int(text)

    def set_offset(self, topic: str, partition: int, offset: int) -> None:
        self.kv.put(f"O{SEP}{topic}{SEP}{partition}", str(offset))

    def count(self, lookup: str) -> int:
        """How many entries ``lookup`` holds."""
        return sum(1 for _ in self.kv.scan(f"N{SEP}{lookup}{SEP}"))
