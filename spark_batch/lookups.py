"""The stream's lookup joins in batch: final entries from the archive, broadcast, then mapped.

``lookup_entries`` reads the entry events of every lookup out of the
archive being backfilled (an event carries entries for the lookups on its
topic, ``App.topic_of``: the topic of the agent declaring its type, or a
topic only lookups read, declared in ``App(lookup_topics=...)``), merges them per key with the stream's
rule (``framework.core.lookup.merge``: higher version, then higher rank, then larger value)
in a Spark reduce, and broadcasts the final table to the executors (a
broadcast join: the table is collected on the driver). ``map_joined`` maps
one event with those final entries and the stream's version rule
(``framework.state.join.map_with_state``), so a backfill writes exactly the
rows the stream converges to. An event whose entry is not in the archive is
rejected at stage ``lookup`` (parked, and counted in the report).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from pyspark import RDD
from pyspark.sql import SparkSession

from framework.core.events import Event, parse_event
from framework.core.lookup import Entry, entry_of, merge
from framework.core.mutations import Mutation
from framework.core.projection import Projection
from framework.runtime.errors import MessageError
from framework.state.join import join_marks, map_with_state
from framework.state.view import Missing, StateView
from spark_batch.apps import app_of, load_app

__all__ = ["lookup_entries", "BatchEntries", "map_joined", "entries_of"]

#: The cache's answer for a key it does not hold (its values may be None).
_MISSING: Literal[False] = False


def entries_of(app: Any, events: Iterable[Any]) -> Iterator[tuple[tuple[str, str], str]]:
    """``((lookup, key), entry JSON)`` for every entry the raw ``events`` carry."""
    for raw in events:
        try:
            event = parse_event(raw)
            topic = app.topic_of(event)
        except Exception:  # noqa: BLE001 - the backfill itself rejects it
            continue
        for lookup in app.lookups:
            if lookup.topic != topic:
                continue
            try:
                found = entry_of(lookup, event)
            except Exception:  # noqa: BLE001 - no valid entry: skipped, as in the stream
                continue
            if found is not None:
                yield (lookup.name, found[0]), found[1].to_json()


def _entries_task(app_spec: str, part: Iterable[Any]) -> Iterator[tuple[tuple[str, str], str]]:
    return entries_of(app_of(app_spec), part)


def _merge(a: str, b: str) -> str:
    ea, eb = Entry.from_json(a), Entry.from_json(b)
    return a if merge(ea, eb) is ea else b


def lookup_entries(spark: SparkSession, raw: RDD, app_spec: str) -> Any:
    """The broadcast final entries of the app's lookups (None when it declares none)."""
    if not load_app(app_spec).lookups:
        return None
    pairs = raw.mapPartitions(functools.partial(_entries_task, app_spec)).reduceByKey(_merge).collect()
    table: dict[str, dict[str, str]] = {}
    for (lookup, key), text in pairs:
        table.setdefault(lookup, {})[key] = text
    return spark.sparkContext.broadcast(table)


class BatchEntries:
    """Read access to a final entry table ``{lookup: {key: entry JSON}}``."""

    def __init__(self, table: Mapping[str, Mapping[str, str]]) -> None:
        self.table = table
        self._parsed: dict[tuple[str, str], Entry | None] = {}

    def get(self, lookup: str, key: str) -> Entry | None:
        found = self._parsed.get((lookup, key), _MISSING)
        if found is False:
            text = self.table.get(lookup, {}).get(key)
            found = self._parsed[(lookup, key)] = None if text is None else Entry.from_json(text)
        return found


def map_joined(
    agent: Any, event: Event, entries: BatchEntries, projections: Sequence[Projection] = ()
) -> list[Mutation]:
    """``event`` mapped with the final entries, at the stream's write version, plus version marks;
    MessageError (stage ``lookup``) when an entry it reads is missing."""
    view = StateView(entries.get, frozenset(lookup.name for lookup in agent.lookups))
    try:
        mutations = map_with_state(agent, event, view)
    except Missing as miss:
        raise MessageError("lookup", miss) from miss
    try:
        return mutations + join_marks(projections, mutations)
    except Exception as exc:  # noqa: BLE001 - as map_event
        raise MessageError("map", exc) from exc
